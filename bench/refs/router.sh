#!/usr/bin/env bash
# bench/refs/router.sh - large messages through a router against a direct connection.
#
#   bench/refs/router.sh [-r ROUNDS] [-n MESSAGES] [-s BYTES] [TERN]
#
# Sends MESSAGES messages of BYTES bytes (default 40 of 32 MiB) with
# `tern pub` to `tern sub`, on 127.0.0.1, in two ways that alternate for
# ROUNDS rounds (default 3):
#   direct   tern sub listens, tern pub connects to it
#   router   both connect to a `tern node` with "mode": "router"
# The rate is tern sub's own (first message to last). A measurement fails
# unless tern sub got every message with missed=0 and both exited 0.
# Prints each measurement, the median MB/s of each way, and router/direct.
# TERN is the tern binary (default: build/node/tern under the repository root).
# Exit status: 0 when every measurement delivered everything, 1 otherwise.
set -u

rounds=3 n=40 size=$((32 * 1024 * 1024)) tern=""
while [ $# -gt 0 ]; do
	case "$1" in
	-r) rounds=$2; shift 2 ;;
	-n) n=$2; shift 2 ;;
	-s) size=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) tern=$1; shift ;;
	esac
done
root=$(cd "$(dirname "$0")/../.." && pwd)
tern=${tern:-$root/build/node/tern}
[ -x "$tern" ] || { echo "router.sh: no tern binary at $tern (build it first)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
echo '{"mode": "router"}' >"$tmp/router.json"
status=0
port=$((20000 + $$ % 20000))

# one WAY: prints "WAY MB/s" or "WAY failed"
one() {
	local way=$1 ep npid="" spid prc src
	port=$((port + 2))
	ep=tcp://127.0.0.1:$port
	if [ "$way" = router ]; then
		"$tern" node -c "$tmp/router.json" --listen "$ep" --log warn 2>"$tmp/node.err" &
		npid=$!
		sleep 0.5
		"$tern" sub 'big/**' --connect "$ep" --count "$n" --format none --timeout 120 \
			2>"$tmp/sub.err" &
	else
		"$tern" sub 'big/**' --listen "$ep" --count "$n" --format none --timeout 120 \
			2>"$tmp/sub.err" &
	fi
	spid=$!
	sleep 0.5
	"$tern" pub big/a --connect "$ep" --size "$size" --count "$n" 2>"$tmp/pub.err"
	prc=$?
	wait "$spid"
	src=$?
	if [ -n "$npid" ]; then
		kill "$npid"
		wait "$npid" 2>/dev/null
	fi
	local line
	line=$(grep '^messages=' "$tmp/sub.err" | tail -n 1)
	if [ $prc -ne 0 ] || [ $src -ne 0 ] || ! echo "$line" | grep -q "^messages=$n .*missed=0"; then
		echo "$way failed (pub $prc, sub $src): $line" >&2
		echo "$way failed"
		return
	fi
	echo "$way $(echo "$line" | sed 's/.*MB_per_s=\([0-9.]*\).*/\1/')"
}

: >"$tmp/results"
for r in $(seq "$rounds"); do
	for way in direct router; do
		res=$(one "$way")
		echo "round=$r $res"
		echo "$res" >>"$tmp/results"
		case "$res" in *failed) status=1 ;; esac
	done
done

median() {
	grep "^$1 [0-9]" "$tmp/results" | awk '{print $2}' | sort -g |
		awk '{v[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'
}
d=$(median direct)
t=$(median router)
echo
printf 'direct  median %s MB/s\nrouter  median %s MB/s\n' "$d" "$t"
awk -v d="$d" -v t="$t" 'BEGIN { if (d > 0) printf "router/direct %.3f (target >= 0.5: %s)\n", t / d, ((t / d >= 0.5) ? "met" : "not met") }'
exit $status
