#!/usr/bin/env bash
# low_latency in a config file changes the mode of the connections a node
# accepts, and the node says so in its log and in its stats; without it the
# connection is batched.
TERN=$1
. "$(dirname "$0")/lib.sh"

run_case() {
	local label=$1 config=$2 want=$3 other=$4
	printf '%s\n' "$config" >"$TMP/$label.json"
	start node 30 node -c "$TMP/$label.json" --listen tcp://127.0.0.1:0
	local ep
	ep=$(bound node)
	start sub 30 sub k --connect "$ep" --format none
	wait_for "$TMP/node.err" "connected .*$want mode" 30 || fail "$label: the node did not log a $want connection"
	if grep -q "connected .*$other mode" "$TMP/node.err"; then
		fail "$label: a connection ran in $other mode"
	fi
	kill -USR1 "$(tern_pid node)"
	wait_for "$TMP/node.err" '^\{"command":"node"' 5 || fail "$label: no stats line"
	grep '^{"command":"node"' "$TMP/node.err" | grep -q "$want" || fail "$label: the stats do not say $want: $(grep '^{' "$TMP/node.err")"
	stop sub
	stop node
	echo "ok $label"
}

run_case fast '{ "low_latency": true }' low-latency batched
run_case batched '{ "low_latency": false }' batched low-latency
echo "2 passed, 0 failed"
