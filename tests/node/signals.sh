#!/usr/bin/env bash
# Signals and observability: SIGUSR1 writes one JSON line of stats on
# stderr; SIGINT and SIGTERM end every command with status 0 and its summary
# line; --rate paces; --stats prints per-key lines each second.
TERN=$1
. "$(dirname "$0")/lib.sh"

json_ok() {
	# one line, a JSON object; checked by python3 when it is there
	local line=$1
	case "$line" in
	'{'*'}') ;;
	*) return 1 ;;
	esac
	if command -v python3 >/dev/null 2>&1; then
		printf '%s' "$line" | python3 -c 'import json,sys; json.load(sys.stdin)' || return 1
	fi
	return 0
}

start node 30 node --listen tcp://127.0.0.1:0 --stats
ep=$(bound node)

# SIGUSR1 on the node
kill -USR1 "$(tern_pid node)"
wait_for "$TMP/node.err" '^\{"command":"node"' 5 || fail "node: no JSON line after SIGUSR1"
json_ok "$(grep '^{"command":"node"' "$TMP/node.err" | head -n 1)" || fail "node: the SIGUSR1 line is not JSON"
echo "ok node SIGUSR1"

# a sub with --stats, fed at a paced rate for about 1.5 s
start sub 30 sub k --connect "$ep" --stats --format none
start pub 30 pub k --connect "$ep" --data hello --count 300 --rate 200 --wait 10
finish pub 0
grep -Eq '^messages=300 bytes=1500 seconds=' "$TMP/pub.err" || fail "pub summary: $(cat "$TMP/pub.err")"
secs=$(summary_field pub seconds)
awk -v s="$secs" 'BEGIN { exit !(s >= 1.2) }' || fail "--rate 200 sent 300 messages in $secs s"
echo "ok pub --rate ($secs s)"
wait_for "$TMP/sub.err" '^stats key=k msgs_per_s=[0-9.]+ MB_per_s=[0-9.]+ drops=[0-9]+$' 5 || fail "sub --stats printed no per-key line"
wait_for "$TMP/node.err" '^stats node=' 5 || fail "node --stats printed no line"
echo "ok --stats"

kill -USR1 "$(tern_pid sub)"
wait_for "$TMP/sub.err" '^\{"command":"sub"' 5 || fail "sub: no JSON line after SIGUSR1"
json_ok "$(grep '^{"command":"sub"' "$TMP/sub.err" | head -n 1)" || fail "sub: the SIGUSR1 line is not JSON"
echo "ok sub SIGUSR1"

# SIGINT ends the sub with status 0 and its summary
kill -INT "$sub_pid"
finish sub 0
grep -Eq '^messages=300 bytes=1500 seconds=[0-9.]+ msgs_per_s=[0-9.]+ MB_per_s=[0-9.]+ missed=0$' "$TMP/sub.err" ||
	fail "sub summary after SIGINT: $(grep messages= "$TMP/sub.err")"
echo "ok sub SIGINT"

# a pub reading a stdin that never ends (tail -f) stops on SIGTERM
mkfifo "$TMP/in"
start_stdin pub 30 "$TMP/in" pub logs/app --connect "$ep" --wait 0
exec 3>"$TMP/in"
printf 'one\ntwo\n' >&3
sleep 0.5
kill -USR1 "$(tern_pid pub)"
wait_for "$TMP/pub.err" '^\{"command":"pub"' 5 || fail "pub: no JSON line after SIGUSR1"
kill -TERM "$pub_pid"
finish pub 0
exec 3>&-
grep -Eq '^messages=2 bytes=6 ' "$TMP/pub.err" || fail "pub summary after SIGTERM: $(cat "$TMP/pub.err")"
echo "ok pub SIGTERM"

# the node: SIGTERM, status 0
stop node
echo "6 passed, 0 failed"
