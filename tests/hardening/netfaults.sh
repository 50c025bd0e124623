#!/usr/bin/env bash
# Real network faults. Two test hosts are network namespaces joined by a
# veth pair (10.213.1.1 and 10.213.1.2); the kernel's tbf limits bandwidth
# (this kernel has no netem); the fault relay (faultrelay.c) adds delay,
# stalls and resets in user space on loopback.
#   tbf_stream        1,000,000 sequence-numbered messages (the payload is
#                     the decimal number: 1 to 7 bytes, the smallest that
#                     shows order) across a 6 Mbit/s tbf link: complete, in
#                     order; prints the throughput and the link's use
#   relay_stall       the same stream through the relay with a 20 ms delay
#                     each way and a 2 s stall mid-stream: complete, in
#                     order, without a reconnect
#   link_cut          `ip link set DEV down` under a live stream: both ends
#                     notice within the keepalive deadline (3 x keepalive_ms,
#                     500 ms here), and the subscriber connects again by
#                     itself when the link comes back up
#   reset_best_effort the relay (50 ms each way) resets the connection
#                     mid-stream, with messages in flight inside it: the
#                     subscriber reconnects; what it received plus what it
#                     counts missed is exactly what was published, without
#                     a duplicate
#   reset_reliable    the same in reliable mode: the session resumes, what
#                     was not acknowledged is sent again, nothing is missed
#                     and nothing is delivered twice
# Cases that need namespaces exit 77 (skipped) where they cannot be made.
# Usage: netfaults.sh TERN FAULTRELAY CASE
TERN=$1
RELAY=$2
CASE=$3
. "$(dirname "$0")/hlib.sh"

passed=0
NS_A="tern-$$-a"
NS_B="tern-$$-b"
DEV_A="tva$$"
DEV_B="tvb$$"
ADDR_A=10.213.1.1
ADDR_B=10.213.1.2
net_made=false

net_cleanup() {
	if $net_made; then
		ip netns del "$NS_A" 2>/dev/null
		ip netns del "$NS_B" 2>/dev/null
	fi
}
trap 'cleanup; net_cleanup' EXIT

# make_net: the two hosts and their link, or skip the test.
make_net() {
	local why
	command -v ip >/dev/null 2>&1 || skip "the ip command is not installed"
	if ! why=$(ip netns add "$NS_A" 2>&1); then
		skip "cannot create a network namespace (needs root and netns support): $why"
	fi
	net_made=true
	ip netns add "$NS_B" || fail "cannot create a second namespace"
	ip link add "$DEV_A" type veth peer name "$DEV_B" || fail "cannot create a veth pair"
	ip link set "$DEV_A" netns "$NS_A" && ip link set "$DEV_B" netns "$NS_B" || fail "cannot move the veth ends"
	ip -n "$NS_A" addr add "$ADDR_A/24" dev "$DEV_A" && ip -n "$NS_B" addr add "$ADDR_B/24" dev "$DEV_B" ||
		fail "cannot address the veth ends"
	ip -n "$NS_A" link set lo up && ip -n "$NS_B" link set lo up || fail "cannot bring loopback up"
	ip -n "$NS_A" link set "$DEV_A" up && ip -n "$NS_B" link set "$DEV_B" up || fail "cannot bring the link up"
}

# start_in NS NAME SECONDS INPUT tern-args...: like start, inside namespace
# NS, with stdin from the file INPUT (/dev/null for none). ip netns exec
# execs tern, so tern_pid NAME is still tern's pid.
start_in() {
	local ns=$1 name=$2 secs=$3 input=$4
	shift 4
	: >"$TMP/$name.out" # emptied now: the job's own redirection may run late
	: >"$TMP/$name.err"
	timeout --foreground -k 5 "$secs" ip netns exec "$ns" "$TERN" "$@" <"$input" >"$TMP/$name.out" 2>"$TMP/$name.err" &
	local pid=$!
	PIDS+=("$pid")
	printf -v "${name}_pid" '%s' "$pid"
}

# start_relay NAME relay-args...: the relay on 127.0.0.1; sets RELAY_PORT.
# (Not for a $(...): the relay must stay in PIDS of this shell, so that
# cleanup stops it.)
start_relay() {
	local name=$1
	shift
	: >"$TMP/$name.out" # emptied now: the job's own redirection may run late
	: >"$TMP/$name.err"
	timeout --foreground -k 5 120 "$RELAY" --listen 127.0.0.1:0 "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
	PIDS+=("$!")
	printf -v "${name}_pid" '%s' "$!"
	wait_for "$TMP/$name.err" '^listening on ' 10 || fail "the relay did not start: $(cat "$TMP/$name.err")"
	RELAY_PORT=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$TMP/$name.err" | head -n 1)
}

# check_stream NAME TOTAL: NAME printed exactly k<TAB>1 .. k<TAB>TOTAL.
check_stream() {
	if seq 1 "$2" | sed 's/^/k\t/' | cmp -s - "$TMP/$1.out"; then
		echo "ok $1 received all $2 messages in order"
		passed=$((passed + 1))
	else
		bad "$1 did not receive 1..$2 in order: $(lines "$1") lines, missed $(summary_field "$1" missed) ($(seq 1 "$2" | sed 's/^/k\t/' | cmp - "$TMP/$1.out" 2>&1 | head -n 1))"
	fi
}

# honest NAME TOTAL: increasing payloads, and received + missed == TOTAL.
honest() {
	local got missed dups
	got=$(summary_field "$1" messages)
	missed=$(summary_field "$1" missed)
	dups=$(cut -f2 "$TMP/$1.out" | sort -n | uniq -d | wc -l)
	if ! cut -f2 "$TMP/$1.out" | awk 'NR > 1 && $1 <= prev { bad = 1 } { prev = $1 } END { exit bad }'; then
		bad "$1: messages out of order or delivered twice ($dups duplicates)"
	elif [ "$got" != "$(lines "$1")" ]; then
		bad "$1: its summary says $got messages but it printed $(lines "$1")"
	elif [ "$((got + missed))" -ne "$2" ]; then
		bad "$1: received $got + missed $missed = $((got + missed)), but $2 were published"
	else
		echo "ok $1: received $got + missed $missed = $2, in order, no duplicate"
		passed=$((passed + 1))
	fi
}

case "$CASE" in
tbf_stream | tbf_exit)
	make_net
	# tbf_stream: 1,000,000 messages; the publisher's stdin stays open
	# until the subscriber has them all, so only the link is tested.
	# tbf_exit: 300,000 messages, and the publisher exits at the end of its
	# input as `seq ... | tern pub` would: what it accepted must still
	# arrive, however slow the link.
	total=1000000
	wait_s=120
	if [ "$CASE" = tbf_exit ]; then
		total=300000
		wait_s=30
	fi
	# 6 Mbit/s leaving host A. The bucket holds 16 KiB: a smaller one
	# drops the veth's large (GSO) packets and TCP crawls on retransmits
	tc -n "$NS_A" qdisc add dev "$DEV_A" root tbf rate 6mbit burst 16kb limit 512kb ||
		fail "cannot add a tbf qdisc"
	seq 1 $total >"$TMP/input"
	mkfifo "$TMP/feed"
	start_in "$NS_A" pub 150 "$TMP/feed" pub k --listen "tcp://$ADDR_A:7447" --wait 20
	(
		exec >"$TMP/feed"
		cat "$TMP/input"
		if [ "$CASE" = tbf_stream ]; then
			n=0
			while [ ! -f "$TMP/done" ] && [ $n -lt 1500 ]; do
				sleep 0.1
				n=$((n + 1))
			done
		fi
	) &
	PIDS+=("$!")
	sleep 0.3
	start_in "$NS_B" sub 150 /dev/null sub k --connect "tcp://$ADDR_A:7447" --count $total --timeout $wait_s --log info
	t0=$(now_s)
	wait_status sub rc
	secs=$(elapsed "$t0")
	touch "$TMP/done"
	wait_status pub rc_pub
	[ "$rc" = 0 ] || bad "the subscriber exited with status $rc: $(grep -v '^messages=' "$TMP/sub.err" | grep -Ev 'refused|handshake' | tail -n 3)"
	[ "$rc_pub" = 0 ] || bad "the publisher exited with status $rc_pub: $(tail -n 2 "$TMP/pub.err")"
	if grep -q 'reset by peer' "$TMP/sub.err"; then
		bad "the publisher's side reset the connection before its data was delivered: $(grep -m 1 'disconnected' "$TMP/sub.err" | sed 's/^.*info: //')"
	fi
	check_stream sub $total
	bytes=$(summary_field sub bytes)
	sub_secs=$(summary_field sub seconds)
	sent=$(tc -s -n "$NS_A" qdisc show dev "$DEV_A" | awk '/Sent/ { print $2; exit }')
	awk -v b="${bytes:-0}" -v n=$total -v s="${sub_secs:-0}" -v w="${sent:-0}" 'BEGIN {
		if (s <= 0) { print "tbf 6 Mbit/s: no throughput to report"; exit }
		printf "tbf 6 Mbit/s: %d messages (%d payload bytes, %.1f on average) in %.2f s: %.0f msgs/s, payload %.2f Mbit/s, with tern headers %.2f Mbit/s, on the wire (IP, TCP) %.2f Mbit/s = %.0f%% of the link\n",
			n, b, b / n, s, n / s, b * 8 / s / 1e6, (b + 3 * n) * 8 / s / 1e6, w * 8 / s / 1e6, w * 8 / s / 6e6 * 100 }'
	if tsan_build "$TERN"; then
		echo "ThreadSanitizer build: the link's use reported, not judged"
	elif awk -v w="${sent:-0}" -v s="${sub_secs:-0}" 'BEGIN { exit !(s > 0 && w * 8 / s >= 0.7 * 6e6) }'; then
		echo "ok the stream used at least 70% of the link"
		passed=$((passed + 1))
	else
		bad "the stream used less than 70% of the 6 Mbit/s link"
	fi
	echo "whole run, start to last message: $secs s"
	;;
relay_stall)
	total=1000000
	seq 1 $total >"$TMP/input"
	start_stdin pub 120 "$TMP/input" pub k --listen tcp://127.0.0.1:0 --wait 20
	ep=$(bound pub)
	# the stall begins after about 2 MB, a fifth of the stream
	start_relay relay --connect "${ep#tcp://}" --delay-ms 20 --stall-ms 2000 --stall-at-bytes 2000000
	rport=$RELAY_PORT
	start sub 120 sub k --connect "tcp://127.0.0.1:$rport" --count $total --timeout 100
	t0=$(now_s)
	wait_status sub rc
	secs=$(elapsed "$t0")
	wait_status pub rc_pub
	[ "$rc" = 0 ] || bad "the subscriber exited with status $rc: $(tail -n 2 "$TMP/sub.err")"
	[ "$rc_pub" = 0 ] || bad "the publisher exited with status $rc_pub"
	check_stream sub $total
	grep -q 'stall of 2000 ms starts' "$TMP/relay.err" || bad "the relay never stalled: $(cat "$TMP/relay.err")"
	accepted=$(grep -c 'accepted' "$TMP/relay.err")
	if [ "$accepted" -eq 1 ]; then
		echo "ok one connection throughout: the 2 s stall caused no reconnect"
		passed=$((passed + 1))
	else
		bad "the subscriber connected $accepted times: the stall broke the connection"
	fi
	grep -E 'stall|ended' "$TMP/relay.err"
	echo "relay (20 ms each way, 2 s stall): $total messages in $secs s"
	;;
link_cut)
	make_net
	cfg='{ "keepalive_ms": 500, "reconnect": { "initial_ms": 100, "max_ms": 500 }, "log": "info" }'
	echo "$cfg" >"$TMP/net.json"
	start_in "$NS_A" pub 60 /dev/null pub k -c "$TMP/net.json" --listen "tcp://$ADDR_A:7447" --size 8 --count 0 --rate 1000 --wait 20
	sleep 0.3
	start_in "$NS_B" sub 60 /dev/null sub k -c "$TMP/net.json" --connect "tcp://$ADDR_A:7447"
	wait_lines sub 500 10
	cut_at=$(now_s)
	ip -n "$NS_A" link set "$DEV_A" down || fail "cannot take the link down"
	pub_saw="" sub_saw=""
	while le "$(elapsed "$cut_at")" 5; do
		[ -n "$sub_saw" ] || ! grep -q 'disconnected from' "$TMP/sub.err" || sub_saw=$(elapsed "$cut_at")
		[ -n "$pub_saw" ] || ! grep -q 'disconnected from' "$TMP/pub.err" || pub_saw=$(elapsed "$cut_at")
		[ -z "$pub_saw" ] || [ -z "$sub_saw" ] || break
		sleep 0.05
	done
	echo "link down: the subscriber noticed after ${sub_saw:-never} s, the publisher after ${pub_saw:-never} s (keepalive 500 ms, deadline 1.5 s)"
	for who in sub pub; do
		saw=${who}_saw
		if [ -n "${!saw}" ] && le "${!saw}" 2.5; then
			echo "ok the $who detected the cut within the keepalive deadline"
			passed=$((passed + 1))
		else
			bad "the $who did not detect the cut within 2.5 s (keepalive deadline 1.5 s): ${!saw:-never}"
		fi
	done
	sleep 1
	before=$(lines sub)
	connects=$(grep -c 'connected to' "$TMP/sub.err")
	up_at=$(now_s)
	ip -n "$NS_A" link set "$DEV_A" up || fail "cannot bring the link back up"
	back="" flowing=""
	while le "$(elapsed "$up_at")" 8; do
		[ -n "$back" ] || [ "$(grep -c 'connected to' "$TMP/sub.err")" -le "$connects" ] || back=$(elapsed "$up_at")
		[ -n "$flowing" ] || [ "$(lines sub)" -le "$before" ] || flowing=$(elapsed "$up_at")
		[ -z "$back" ] || [ -z "$flowing" ] || break
		sleep 0.05
	done
	echo "link up: reconnected after ${back:-never} s, messages again after ${flowing:-never} s"
	if [ -n "$back" ] && [ -n "$flowing" ] && le "$flowing" 4; then
		echo "ok the connection came back by itself"
		passed=$((passed + 1))
	else
		bad "no reconnection within 4 s of the link coming back (reconnected: ${back:-never}, messages: ${flowing:-never})"
	fi
	stop sub
	stop pub
	;;
reset_best_effort | reset_reliable)
	total=25000
	mode=()
	[ "$CASE" = reset_best_effort ] && mode=(--best-effort)
	seq 1 $total >"$TMP/input"
	cfg='{ "reconnect": { "initial_ms": 100, "max_ms": 500 }, "log": "info" }'
	echo "$cfg" >"$TMP/net.json"
	# the publisher's input stays open until the subscriber has the last
	# message: this case is about the reset, not about the publisher's exit
	mkfifo "$TMP/feed"
	start_stdin pub 60 "$TMP/feed" pub k -c "$TMP/net.json" --listen tcp://127.0.0.1:0 --rate 5000 --wait 20 "${mode[@]}"
	(
		exec >"$TMP/feed"
		cat "$TMP/input"
		n=0
		while [ ! -f "$TMP/done" ] && [ $n -lt 300 ]; do
			sleep 0.1
			n=$((n + 1))
		done
	) &
	PIDS+=("$!")
	ep=$(bound pub)
	# 50 ms each way: about 250 messages are inside the relay when it
	# resets, lost with it, and must be sent again in reliable mode
	start_relay relay --connect "${ep#tcp://}" --delay-ms 50 --reset-after-ms 2000
	rport=$RELAY_PORT
	start sub 60 sub k -c "$TMP/net.json" --connect "tcp://127.0.0.1:$rport"
	wait_for "$TMP/sub.out" "^k	$total\$" 20 || bad "the subscriber never got the last message ($total)"
	sleep 0.3
	touch "$TMP/done"
	wait_status pub rc_pub
	[ "$rc_pub" = 0 ] || bad "the publisher exited with status $rc_pub: $(tail -n 2 "$TMP/pub.err")"
	stop sub
	grep -E 'reset|accepted' "$TMP/relay.err"
	grep -q 'reset at byte' "$TMP/relay.err" || bad "the relay never reset the connection"
	[ "$(grep -c accepted "$TMP/relay.err")" -ge 2 ] || bad "the subscriber did not reconnect after the reset"
	echo "subscriber: $(lines sub) messages, missed $(summary_field sub missed) of $total"
	if [ "$CASE" = reset_best_effort ]; then
		honest sub $total
		[ "$(summary_field sub missed)" -gt 0 ] || bad "nothing counted missed, though a reset cut the stream"
	else
		check_stream sub $total
		honest sub $total
	fi
	;;
*)
	fail "unknown case $CASE"
	;;
esac
no_sanitizer_report "$TMP"/*.err
verdict "$passed"
