#!/usr/bin/env bash
# bench/refs/run.sh - tern beside framed TCP and ZeroMQ PUB/SUB on loopback.
#
#   bench/refs/run.sh [-r ROUNDS] [TERN]
#
# Measures, on 127.0.0.1, each in its own sender and receiver processes:
#   tcp      framed TCP, 64-byte records (tcp_thr: 4-byte length + record,
#            coalesced into 64 KiB writes; the receiver walks the prefixes)
#   zmq      ZeroMQ PUB/SUB, 64-byte messages, high-water marks 0 (zmq_thr)
#   tern     tern pub -> tern sub, batched, 64 bytes
#   tern8    tern pub -> tern sub, batched, 8 bytes
#   lowlat8  tern pub -> tern sub, low latency, 8 bytes
# Every rate is taken at the receiver, from the first message (or byte) to
# the last. A round runs each once, in that order, so drift on a shared
# machine hits all of them alike; the table gives the median, min and max
# of the rounds and the ratios of the medians against their targets.
#
# TERN is the tern binary (default: build/node/tern under the repository
# root; build it first: cmake -S . -B build && cmake --build build).
# Environment: ROUNDS (default 3), N_TCP, N_ZMQ, N_TERN64, N_TERN8, N_LOWLAT8
# (messages per measurement), CAP (seconds a receiver waits, default 30).
# Exit status: 0 when every measurement delivered every message, 1 when one
# failed (it is left out of the table), 2 for a usage or build error.
set -u

usage() {
	sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
}

rounds=${ROUNDS:-3}
tern=""
while [ $# -gt 0 ]; do
	case "$1" in
	-r | --rounds)
		[ $# -ge 2 ] || { echo "run.sh: $1 needs a number" >&2; exit 2; }
		rounds=$2
		shift 2
		;;
	-h | --help)
		usage
		exit 0
		;;
	-*)
		echo "run.sh: unknown option $1 (see --help)" >&2
		exit 2
		;;
	*)
		tern=$1
		shift
		;;
	esac
done
case "$rounds" in
'' | *[!0-9]* | 0) echo "run.sh: ROUNDS must be a positive integer, not \"$rounds\"" >&2; exit 2 ;;
esac

n_tcp=${N_TCP:-80000000}
n_zmq=${N_ZMQ:-6000000}
n_tern64=${N_TERN64:-8000000}
n_tern8=${N_TERN8:-15000000}
n_lowlat8=${N_LOWLAT8:-8000000}
cap=${CAP:-30}
kill_after=$((cap + 15))

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tern=${tern:-$root/build/node/tern}
if [ ! -x "$tern" ]; then
	echo "run.sh: no tern binary at $tern; build it first:" >&2
	echo "  cmake -S . -B build && cmake --build build" >&2
	exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tern-refs.XXXXXX") || exit 2
live=() # background processes started here and not yet waited for

# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	local pid
	for pid in "${live[@]}"; do
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in "${live[@]}"; do
		wait "$pid" 2>/dev/null
	done
	live=()
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "run.sh: interrupted" >&2; exit 130' INT TERM

# start CMD... in the background under timeout; its pid goes to $bg
start() {
	local out=$1 err=$2
	shift 2
	timeout -k 2 "$kill_after" "$@" >"$out" 2>"$err" &
	bg=$!
	live+=("$bg")
}

# wait for a process started by start(); its exit status goes to $rc
finish() {
	local pid=$1 i
	wait "$pid"
	rc=$?
	for i in "${!live[@]}"; do
		[ "${live[$i]}" = "$pid" ] && unset "live[$i]"
	done
	live=("${live[@]}")
}

if ! timeout 120 make -s -C "$here" O="$tmp" >"$tmp/make.log" 2>&1; then
	cat "$tmp/make.log" >&2
	echo "run.sh: building the reference programs failed (zmq_thr needs libzmq3-dev:" \
		"scripts/setup installs it)" >&2
	exit 2
fi

# Ports: a block of 100 from the process id, below the ephemeral range, each
# measurement taking the next one that no socket uses.
port_base=$((20000 + ($$ % 120) * 100))
port_next=0
port_in_use() {
	local hex
	hex=$(printf '%04X' "$1")
	awk -v h="$hex" 'FNR > 1 { split($2, a, ":"); if (a[2] == h) f = 1 } END { exit !f }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null
}
pick_port() {
	local i
	for i in $(seq 100); do
		port=$((port_base + port_next))
		port_next=$(((port_next + 1) % 100))
		port_in_use "$port" || return 0
	done
	echo "run.sh: no free port in $port_base..$((port_base + 99))" >&2
	return 1
}
# wait (at most 10 s) until something listens on 127.0.0.1:$1 and $2 still runs
wait_listening() {
	local hex i
	hex=$(printf '%04X' "$1")
	for i in $(seq 200); do
		if awk -v h="0100007F:$hex" 'FNR > 1 && $2 == h && $4 == "0A" { f = 1 } END { exit !f }' \
			/proc/net/tcp; then
			return 0
		fi
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# field NAME FILE: the value of NAME=... on the last line of FILE that has it
field() {
	awk -v k="$1" '{ for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) v = substr($i, length(k) + 2) }
		END { print v }' "$2"
}

failures=0
# fail KEY ROUND REASON [FILE...]: report a failed measurement and its logs
fail() {
	local key=$1 round=$2 reason=$3 f
	shift 3
	printf 'round=%s layer=%s FAILED: %s\n' "$round" "$key" "$reason"
	for f in "$@"; do
		[ -s "$f" ] && sed "s/^/    ${f##*/}| /" "$f" | tail -n 5
	done
	failures=$((failures + 1))
}
# ok KEY ROUND SIZE MSGS SECS RATE TIMING: report and keep a measurement
ok() {
	printf 'round=%s layer=%s size=%s msgs=%s secs=%s msgs_per_s=%.0f timing=%s\n' \
		"$2" "$1" "$3" "$4" "$5" "$6" "$7"
	echo "$6" >>"$tmp/rates.$1"
}

# ref KEY ROUND PROG SIZE COUNT: one run of tcp_thr or zmq_thr
ref() {
	local key=$1 round=$2 prog=$3 size=$4 count=$5 ep rpid spid src
	pick_port || { fail "$key" "$round" "no free port"; return; }
	if [ "$prog" = zmq_thr ]; then ep=tcp://127.0.0.1:$port; else ep=127.0.0.1:$port; fi
	start "$tmp/recv.out" "$tmp/recv.err" "$tmp/$prog" recv "$ep" "$size" "$count" "$cap"
	rpid=$bg
	if ! wait_listening "$port" "$rpid"; then
		finish "$rpid"
		fail "$key" "$round" "receiver never listened on port $port" "$tmp/recv.err"
		return
	fi
	start /dev/null "$tmp/send.err" "$tmp/$prog" send "$ep" "$size" "$count" "$cap"
	spid=$bg
	finish "$spid"
	src=$rc
	finish "$rpid"
	local msgs
	msgs=$(field msgs "$tmp/recv.out")
	if [ "$rc" -ne 0 ] || [ "$src" -ne 0 ] || [ "$msgs" != "$count" ]; then
		fail "$key" "$round" "receiver got ${msgs:-?} of $count (receiver exit $rc, sender exit $src)" \
			"$tmp/recv.out" "$tmp/recv.err" "$tmp/send.err"
		return
	fi
	ok "$key" "$round" "$size" "$msgs" "$(field secs "$tmp/recv.out")" \
		"$(field msgs_per_s "$tmp/recv.out")" receiver-first-to-last
}

# tern_run KEY ROUND MODE SIZE COUNT: one tern pub -> tern sub run
tern_run() {
	local key=$1 round=$2 mode=$3 size=$4 count=$5 ep rpid spid src
	pick_port || { fail "$key" "$round" "no free port"; return; }
	ep=tcp://127.0.0.1:$port
	start /dev/null "$tmp/sub.err" "$tern" sub 'bench/**' --listen "$ep" --count "$count" \
		--format none --timeout "$cap" "$mode"
	rpid=$bg
	if ! wait_listening "$port" "$rpid"; then
		finish "$rpid"
		fail "$key" "$round" "tern sub never listened on port $port" "$tmp/sub.err"
		return
	fi
	start /dev/null "$tmp/pub.err" "$tern" pub bench/a --connect "$ep" --size "$size" \
		--count "$count" --wait 10 "$mode"
	spid=$bg
	finish "$spid"
	src=$rc
	finish "$rpid"
	# tern sub's summary: messages=N bytes=B seconds=S msgs_per_s=X MB_per_s=Y missed=M
	grep '^messages=' "$tmp/sub.err" >"$tmp/sub.sum"
	local msgs missed
	msgs=$(field messages "$tmp/sub.sum")
	missed=$(field missed "$tmp/sub.sum")
	if [ "$rc" -ne 0 ] || [ "$src" -ne 0 ] || [ "$msgs" != "$count" ] || [ "$missed" != 0 ]; then
		fail "$key" "$round" "tern sub got ${msgs:-?} of $count, missed=${missed:-?} (sub exit $rc, pub exit $src)" \
			"$tmp/sub.err" "$tmp/pub.err"
		return
	fi
	ok "$key" "$round" "$size" "$msgs" "$(field seconds "$tmp/sub.sum")" \
		"$(field msgs_per_s "$tmp/sub.sum")" tern-sub-first-to-last
}

build_type=""
cache=$(dirname "$tern")/../CMakeCache.txt
if [ -f "$cache" ]; then
	build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$cache")
	build_type=${build_type:-RelWithDebInfo (the CMakeLists.txt default)}
fi
rev=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git -C "$root" status --porcelain -uno 2>/dev/null)" ] && rev="$rev (with local changes)"

echo "tern against framed TCP and ZeroMQ PUB/SUB on 127.0.0.1"
echo "tern: $tern${build_type:+, build type $build_type}, commit $rev"
echo "zeromq: $(pkg-config --modversion libzmq 2>/dev/null || echo unknown); cpus: $(nproc);" \
	"load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rounds: $rounds; messages: tcp $n_tcp, zmq $n_zmq, tern $n_tern64, tern8 $n_tern8," \
	"lowlat8 $n_lowlat8; receivers give up after $cap s"
echo "timing: tcp and zmq from their receiver (first to last byte or message), tern from" \
	"tern sub's own summary (first to last message)"
echo

for round in $(seq "$rounds"); do
	ref tcp "$round" tcp_thr 64 "$n_tcp"
	ref zmq "$round" zmq_thr 64 "$n_zmq"
	tern_run tern "$round" --batched 64 "$n_tern64"
	tern_run tern8 "$round" --batched 8 "$n_tern8"
	tern_run lowlat8 "$round" --low-latency 8 "$n_lowlat8"
done

# summary KEY: "median min max count" of the kept rates, or "- - - 0"
summary() {
	if [ ! -s "$tmp/rates.$1" ]; then
		echo "- - - 0"
		return
	fi
	sort -g "$tmp/rates.$1" | awk '{ v[NR] = $1 }
		END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		      printf "%.0f %.0f %.0f %d\n", m, v[1], v[NR], NR }'
}

echo
printf '%-28s %12s %12s %12s %7s\n' "msgs/s (median of rounds)" median min max rounds
for row in "tern:tern batched 64 B" "tcp:framed TCP 64 B" "zmq:ZeroMQ PUB/SUB 64 B" \
	"tern8:tern batched 8 B" "lowlat8:tern lowlat 8 B"; do
	key=${row%%:*}
	read -r med min max n <<<"$(summary "$key")"
	printf '%-28s %12s %12s %12s %4s/%s\n' "${row#*:}" "$med" "$min" "$max" "$n" "$rounds"
done

echo
printf '%-28s %12s %12s  %s\n' "ratio (of medians)" value target verdict
ratio() {
	local label=$1 num=$2 den=$3 target=$4 a b
	a=$(summary "$num" | cut -d' ' -f1)
	b=$(summary "$den" | cut -d' ' -f1)
	if [ "$a" = - ] || [ "$b" = - ]; then
		printf '%-28s %12s %12s  %s\n' "$label" - ">= $target" "not met (no data)"
		return
	fi
	awk -v l="$label" -v a="$a" -v b="$b" -v t="$target" 'BEGIN {
		r = a / b
		printf "%-28s %12.3f %12s  %s\n", l, r, ">= " t, (r >= t ? "met" : "not met") }'
}
ratio "tern/tcp (64 B)" tern tcp 0.35
ratio "tern/zmq (64 B)" tern zmq 5
ratio "lowlat/batched (8 B)" lowlat8 tern8 0.5

if [ "$failures" -gt 0 ]; then
	echo
	echo "$failures measurement(s) failed and are left out of the table"
	exit 1
fi
exit 0
