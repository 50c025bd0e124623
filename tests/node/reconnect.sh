#!/usr/bin/env bash
# Resilience:
#   sub_first       the sub starts first, connecting to an endpoint where no
#                   one listens yet; the publisher comes later; every message
#                   arrives.
#   sub_late        the publisher runs first; a sub started later gets the
#                   rest of the stream, in order, without gaps.
#   router_restart  a router between a running pub and sub is stopped and
#                   started again: both find it again within 2 s, and the
#                   sub's missed count says how many were lost meanwhile.
#   relay_gives_up  a router keeps what it relayed to a subscriber whose
#                   connection broke (stopped, then killed, before it took
#                   any); when it does not come back within slow_consumer_ms
#                   the router says how many messages it lost, and of what.
# Usage: reconnect.sh TERN CASE
TERN=$1
CASE=$2
. "$(dirname "$0")/lib.sh"

now() { date +%s.%N; }

# lines NAME: how many lines NAME printed so far
lines() { wc -l <"$TMP/$1.out"; }

# wait_lines NAME COUNT SECONDS
wait_lines() {
	local end=$((SECONDS + $3))
	while [ "$(lines "$1")" -lt "$2" ]; do
		[ $SECONDS -le $end ] || fail "$1 got $(lines "$1") lines, expected $2"
		sleep 0.05
	done
}

# in_order NAME FIRST LAST: NAME printed exactly FIRST..LAST, consecutive
consecutive() {
	expected_lines k "$3" | sed -n "$2,\$p" >"$TMP/want"
	cmp -s "$TMP/want" "$TMP/$1.out" || fail "$1: not the consecutive stream $2..$3 (first difference: $(cmp "$TMP/want" "$TMP/$1.out" 2>&1 | head -n 1))"
}

# increasing NAME: payloads strictly increase (in order, no duplicates)
increasing() {
	cut -f2 "$TMP/$1.out" | awk 'NR > 1 && $1 <= prev { bad = 1 } { prev = $1 } END { exit bad }' ||
		fail "$1: messages out of order or duplicated"
}

case "$CASE" in
sub_first)
	sock="unix://$TMP/pub.sock"
	start sub 60 sub k --connect "$sock" --count 5000 --timeout 50
	sleep 1.5 # the sub retries with backoff meanwhile
	seq 1 5000 >"$TMP/input"
	start_stdin pub 60 "$TMP/input" pub k --listen "$sock" --wait 10
	finish pub 0
	finish sub 0
	consecutive sub 1 5000
	[ "$(summary_field sub missed)" = 0 ] || fail "sub missed $(summary_field sub missed)"
	echo "ok sub started first: 5000 of 5000"
	;;
sub_late)
	ep="unix://$TMP/pub.sock"
	seq 1 3000 >"$TMP/input"
	start_stdin pub 60 "$TMP/input" pub k --listen "$ep" --rate 1000 --wait 0
	sleep 1.2
	start sub 60 sub k --connect "$ep"
	finish pub 0
	sleep 0.5
	stop sub
	got=$(lines sub)
	[ "$got" -ge 500 ] || fail "the late sub got only $got messages"
	first=$(head -n 1 "$TMP/sub.out" | cut -f2)
	consecutive sub "$first" 3000
	echo "ok sub started late: $first..3000 without a gap"
	;;
router_restart)
	sock="unix://$TMP/router.sock"
	total=6000
	start r 60 node --mode router --listen "$sock"
	bound r >/dev/null
	start sub 60 sub k --connect "$sock"
	seq 1 $total >"$TMP/input"
	start_stdin pub 60 "$TMP/input" pub k --connect "$sock" --rate 1000 --wait 10
	wait_lines sub 1000 10
	stop r
	mv "$TMP/r.err" "$TMP/r1.log"
	sleep 0.5
	start r 60 node --mode router --listen "$sock"
	bound r >/dev/null
	back=$(now)
	before=$(lines sub)
	while [ "$(lines sub)" -le "$before" ]; do
		if awk -v a="$(now)" -v b="$back" 'BEGIN { exit !(a - b > 2.0) }'; then
			fail "no message within 2 s of the router coming back"
		fi
		sleep 0.02
	done
	echo "ok found again after $(awk -v a="$(now)" -v b="$back" 'BEGIN { printf "%.2f", a - b }') s"
	finish pub 0
	wait_for "$TMP/sub.out" "^k	$total\$" 10 || fail "the sub never got message $total"
	sleep 0.3
	stop sub
	increasing sub
	got=$(summary_field sub messages)
	missed=$(summary_field sub missed)
	[ "$got" = "$(lines sub)" ] || fail "summary says $got messages, printed $(lines sub)"
	[ "$((got + missed))" -eq "$total" ] || fail "received $got + missed $missed != $total"
	[ "$missed" -gt 0 ] || fail "the router was down but nothing was missed"
	echo "ok router restart: received $got, missed $missed, total $total"
	;;
relay_gives_up)
	sock="unix://$TMP/router.sock"
	# the sub's connection breaks when it is killed, not at a keepalive
	# deadline while it is stopped
	printf '{"slow_consumer_ms": 1000, "keepalive_ms": 10000}\n' >"$TMP/r.json"
	start r 60 node --mode router -c "$TMP/r.json" --listen "$sock"
	bound r >/dev/null
	start sub 60 sub k --connect "$sock" --id gone-sub
	# its subscription has reached the router once a first message came
	echo 0 >"$TMP/probe"
	start_stdin probe 30 "$TMP/probe" pub k --connect "$sock" --id probe --wait 10
	finish probe 0
	wait_for "$TMP/sub.out" . 10 || fail "the sub got nothing"
	kill -STOP "$(tern_pid sub)"
	seq 1 100 >"$TMP/input"
	start_stdin pub 60 "$TMP/input" pub k --connect "$sock" --id far-pub --wait 10
	finish pub 0
	kill -KILL "$(tern_pid sub)"
	wait_for "$TMP/r.err" "disconnected from gone-sub" 10 || fail "the router did not see the sub go"
	re="gone-sub did not come back: 100 messages of 'k' from far-pub/[0-9]+, relayed here and kept for it, are lost"
	wait_for "$TMP/r.err" "$re" 10 || fail "the router did not say what it lost: $(tail -n 5 "$TMP/r.err")"
	echo "ok $(grep -Eo "$re" "$TMP/r.err")"
	;;
*)
	fail "unknown case $CASE"
	;;
esac
echo "1 passed, 0 failed"
