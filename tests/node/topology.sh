#!/usr/bin/env bash
# Topologies: N messages from one publisher reach every subscriber once
# each, in order, with nothing missed, duplicated or looping.
#   direct    sub listens, pub connects (no node in between)
#   router    pub -> router -> sub
#   chain     pub -> router A -> router B -> sub
#   triangle  routers A, B, C all connected to each other; pub on A, one sub
#             on each of B and C
# Usage: topology.sh TERN TOPOLOGY N
TERN=$1
TOPO=$2
N=$3
. "$(dirname "$0")/lib.sh"

seq 1 "$N" >"$TMP/input"
expected_lines t/seq "$N" >"$TMP/expected"

# connections NAME: how many "connected" lines NAME has logged
connections() {
	grep -c ': connected ' "$TMP/$1.err" 2>/dev/null || true
}

# wait_connections NAME COUNT: until NAME has logged COUNT connections
wait_connections() {
	local end=$((SECONDS + 15))
	while [ "$(connections "$1")" -lt "$2" ]; do
		[ $SECONDS -le $end ] || fail "$1 has $(connections "$1") connections, expected $2"
		sleep 0.05
	done
}

# check_sub NAME: NAME printed exactly the expected lines
check_sub() {
	# bounded: fail once the count stops growing for 5 s
	local got=0 last=-1 still=0
	while :; do
		got=$(wc -l <"$TMP/$1.out")
		[ "$got" -lt "$N" ] || break
		if [ "$got" -eq "$last" ]; then
			still=$((still + 1))
			[ "$still" -lt 50 ] || fail "$1 got $got of $N messages"
		else
			still=0
			last=$got
		fi
		sleep 0.1
	done
	# a duplicate or a looping message would arrive after the last one
	sleep 1
	stop "$1"
	if ! cmp -s "$TMP/expected" "$TMP/$1.out"; then
		fail "$1: output differs from 1..$N in order (lines: $(wc -l <"$TMP/$1.out"), first difference: $(cmp "$TMP/expected" "$TMP/$1.out" 2>&1 | head -n 1))"
	fi
	[ "$(summary_field "$1" messages)" = "$N" ] || fail "$1: summary says $(summary_field "$1" messages) messages"
	[ "$(summary_field "$1" missed)" = 0 ] || fail "$1: summary says $(summary_field "$1" missed) missed"
	echo "ok $1: $N messages once each, in order ($(grep '^messages=' "$TMP/$1.err"))"
}

subs=()
case "$TOPO" in
direct)
	start sub1 80 sub 't/**' --listen tcp://127.0.0.1:0 --log info
	pub_ep=$(bound sub1)
	subs=(sub1)
	;;
router)
	start r 80 node --mode router --listen tcp://127.0.0.1:0
	pub_ep=$(bound r)
	start sub1 80 sub 't/**' --connect "$pub_ep"
	wait_connections r 1
	subs=(sub1)
	;;
chain)
	start a 80 node --mode router --listen "unix://$TMP/a.sock" --id router-a
	pub_ep=$(bound a)
	start b 80 node --mode router --listen tcp://127.0.0.1:0 --connect "$pub_ep" --id router-b
	b_ep=$(bound b)
	start sub1 80 sub 't/**' --connect "$b_ep"
	wait_connections a 1
	wait_connections b 2
	subs=(sub1)
	;;
triangle)
	start a 80 node --mode router --listen tcp://127.0.0.1:0 --id router-a
	pub_ep=$(bound a)
	start b 80 node --mode router --listen tcp://127.0.0.1:0 --connect "$pub_ep" --id router-b
	b_ep=$(bound b)
	start c 80 node --mode router --listen tcp://127.0.0.1:0 --connect "$pub_ep" --connect "$b_ep" --id router-c
	c_ep=$(bound c)
	start sub1 80 sub 't/**' --connect "$b_ep"
	start sub2 80 sub 't/*' --connect "$c_ep"
	wait_connections a 2
	wait_connections b 3
	wait_connections c 3
	subs=(sub1 sub2)
	;;
*)
	fail "unknown topology $TOPO"
	;;
esac
# declarations travel after the handshakes; give them a moment
sleep 1

start_stdin pub 80 "$TMP/input" pub t/seq --connect "$pub_ep" --wait 10
finish pub 0
grep -Eq "^messages=$N " "$TMP/pub.err" || fail "pub summary: $(cat "$TMP/pub.err")"
echo "ok pub: $(grep '^messages=' "$TMP/pub.err")"
for s in "${subs[@]}"; do
	check_sub "$s"
done
for r in a b c r; do
	v="${r}_pid"
	if [ -n "${!v:-}" ]; then
		stop "$r"
	fi
done
echo "$((${#subs[@]} + 1)) passed, 0 failed"
