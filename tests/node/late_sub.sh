#!/usr/bin/env bash
# A subscriber that joins a router while large messages flow. Subscriber A
# is there from the start; `tern pub` sends COUNT messages of SIZE bytes
# (reliable); subscriber B connects while the router is in the middle of the
# second message.
# A must get all COUNT, in order; B every message from the one after it
# joined through the last, in order; no connection is lost; and `tern pub`
# exits 0 only if everything was delivered.
# Usage: late_sub.sh TERN SIZE COUNT
TERN=$1
SIZE=$2
COUNT=$3
. "$(dirname "$0")/lib.sh"

# start_seqs NAME SECONDS tern-args...: run `tern sub --format json`, keeping
# only the sequence number of each message (the payloads are large) in
# $TMP/NAME.seq; the status of tern goes to $TMP/NAME.rc, the pid of its
# timeout (which passes signals on) to $TMP/NAME.tpid. seqs NAME: the numbers.
start_seqs() {
	local name=$1 secs=$2
	shift 2
	: >"$TMP/$name.err" # emptied now: the job's own redirection may run late
	(
		rc=0
		timeout --foreground -k 5 "$secs" "$TERN" "$@" --format json 2>"$TMP/$name.err" &
		echo "$!" >"$TMP/$name.tpid"
		wait "$!" || rc=$?
		echo "$rc" >"$TMP/$name.rc"
	) | grep --line-buffered -o '"seq":[0-9]*' >"$TMP/$name.json" &
	PIDS+=("$!")
	printf -v "${name}_pid" '%s' "$!"
}

seqs() {
	sed 's/^"seq"://' "$TMP/$1.json"
}

start router 150 node --mode router --listen tcp://127.0.0.1:0 --id late-router
EP=$(bound router)
start_seqs a 150 sub 'big/**' --connect "$EP" --id late-a --count "$COUNT" --timeout 140
wait_for "$TMP/router.err" 'connected from late-a' 10 || fail "A did not connect"
start pub 150 pub big/x --connect "$EP" --id late-pub --size "$SIZE" --count "$COUNT" --wait 10
# B joins once the router has taken one and a half messages from the
# publisher (its stats, on SIGUSR1): in the middle of the second message
router=$(tern_pid router) || fail "no router process"
end=$((SECONDS + 60))
while :; do
	kill -USR1 "$router"
	sleep 0.05
	taken=$(grep -o '"peer":"late-pub"[^]]*' "$TMP/router.err" | grep -o '"bytes_in":[0-9]*' |
		tail -n 1 | cut -d: -f2)
	[ "${taken:-0}" -lt $((SIZE * 3 / 2)) ] || break
	[ $SECONDS -le $end ] || fail "the router did not take 1.5 messages within 60 s"
done
start_seqs b 150 sub 'big/**' --connect "$EP" --id late-b --timeout 120

# settle NAME: until NAME has the last message, or nothing arrived for 15 s;
# then it is stopped (A stops by itself at --count).
settle() {
	local name=$1 got last=-1 end=$((SECONDS + 15))
	while :; do
		if tail -n 1 "$TMP/$name.json" | grep -qx "\"seq\":$COUNT"; then
			break
		fi
		got=$(wc -l <"$TMP/$name.json")
		if [ "$got" -ne "$last" ]; then
			last=$got
			end=$((SECONDS + 15))
		elif [ $SECONDS -gt $end ]; then
			break
		fi
		sleep 0.1
	done
	local tpid="${name}_pid"
	[ -s "$TMP/$name.rc" ] || kill -INT "$(cat "$TMP/$name.tpid")" 2>/dev/null || true
	wait "${!tpid}" || true
}

# the publisher ends once everything was handed to the router (or it gave up)
pub_rc=0
wait "$pub_pid" || pub_rc=$?
settle a
settle b
seqs a >"$TMP/a.seq"
a_got=$(wc -l <"$TMP/a.seq")
seqs b >"$TMP/b.seq"
b_first=$(head -n 1 "$TMP/b.seq")
echo "tern pub exited $pub_rc; A received $a_got of $COUNT; B received $(wc -l <"$TMP/b.seq") (from ${b_first:-none} to $(tail -n 1 "$TMP/b.seq"))"

if [ "$a_got" -ne "$COUNT" ] && [ "$pub_rc" -eq 0 ]; then
	fail "tern pub exited 0, but A received $a_got of $COUNT messages"
fi
[ "$pub_rc" -eq 0 ] || fail "tern pub exited with status $pub_rc"
seq 1 "$COUNT" | cmp -s - "$TMP/a.seq" || fail "A did not receive messages 1 to $COUNT in order"
# B may have nothing only if it reached the router after the publisher left
b_late=$(grep -nE 'connected from late-b|late-pub said goodbye' "$TMP/router.err" | head -n 1 |
	grep -c 'said goodbye' || true)
if [ -z "$b_first" ]; then
	[ "$b_late" = 1 ] || fail "B received nothing"
else
	[ "$b_first" -ge 2 ] || fail "B received message $b_first, published before it joined"
	seq "$b_first" "$COUNT" | cmp -s - "$TMP/b.seq" ||
		fail "B did not receive every message from $b_first to $COUNT in order"
fi
for name in a b; do
	[ "$(summary_field "$name" missed)" = 0 ] || fail "$name counted missed messages"
done
# leaving at the end is a goodbye; anything else lost a connection
if grep -E 'went silent|closing |disconnected|without a first chunk' "$TMP"/*.err |
	grep -v 'said goodbye' >&2; then
	fail "a connection was lost"
fi
stop router
echo "ok"
