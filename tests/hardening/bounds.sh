#!/usr/bin/env bash
# Every number a peer sends has a bound (docs/PROTOCOL.md, "Bounds"): one
# connection at a time (badpeer --probe) sends one value, and the node either
# takes it (it answers the PING that follows) or closes that connection with
# a GOODBYE naming the field. Afterwards the node still serves a publisher
# and a subscriber through it, and exits cleanly on SIGTERM.
# Usage: bounds.sh TERN BADPEER CASE
#   window     HELLO windows of 2^62+1 and 4 GiB, each subscribed to the key
#              a publisher then uses (the node sizes a queue from the window)
#   control    control frames at and above 4096 bytes
#   values     0, max, max+1, UINT32_MAX and UINT64_MAX in the fields of
#              HELLO, OPEN, CLOSE, CREDIT, BLOCKED and frame headers
#   keepalive  a peer whose HELLO announces a keepalive longer than the
#              node's own is not declared dead on the node's deadline
TERN=$1
BADPEER=$2
CASE=$3
. "$(dirname "$0")/hlib.sh"

U32=0xffffffff
U64=0xffffffffffffffff
sanitized=false
if nm -an "$TERN" 2>/dev/null | grep -q '__asan_init' || ldd "$TERN" 2>/dev/null | grep -q libasan; then
	sanitized=true
fi

keepalive=1000
[ "$CASE" = keepalive ] && keepalive=200
cat >"$TMP/node.json" <<EOF
{ "keepalive_ms": $keepalive, "log": "info" }
EOF
start node 120 node -c "$TMP/node.json" --listen tcp://127.0.0.1:0
ep=$(bound node)
node=$(tern_pid node) || fail "the node did not start"
hostport=${ep#tcp://}
passed=0
nprobe=0

# probe NAME HOLD_MS badpeer-args...: one probe connection; its output goes
# to $TMP/NAME.probe.
probe() {
	local name=$1 hold=$2
	shift 2
	timeout -k 5 60 "$BADPEER" --connect "$hostport" --probe --hold-ms "$hold" "$@" \
		>"$TMP/$name.probe" 2>"$TMP/$name.probe.err" ||
		bad "$name: badpeer failed: $(cat "$TMP/$name.probe.err")"
}

# verdict_of NAME: "ok" (the node answered the PING after the values),
# "closed: GOODBYE REASON" or "open" (neither, within the hold).
verdict_of() {
	local f="$TMP/$1.probe"
	if grep -q '^probe closed=1' "$f"; then
		echo "closed: $(sed -n 's/^goodbye: //p' "$f")"
	elif grep -q '^probe .*pong=1' "$f"; then
		echo ok
	else
		echo open
	fi
}

# expect NAME WANT badpeer-args...: WANT is "ok", or an extended regex the
# GOODBYE of the closed connection must match.
expect() {
	local name=$1 want=$2 got
	shift 2
	nprobe=$((nprobe + 1))
	probe "$name" 20000 --until-pong "$@"
	got=$(verdict_of "$name")
	if [ "$want" = ok ]; then
		if [ "$got" = ok ]; then
			passed=$((passed + 1))
		else
			bad "$name: expected the node to take it, got: $got"
		fi
	elif [[ "$got" == closed:* ]] && grep -Eq -- "$want" <<<"$got"; then
		echo "ok $name: $got"
		passed=$((passed + 1))
	else
		bad "$name: expected a close naming /$want/, got: $got"
	fi
}

# serves KEY: a subscriber and a publisher through the node, 200 messages.
serves() {
	local key=$1
	start sub 60 sub "$key" --connect "$ep" --count 200 --timeout 30
	seq 1 200 >"$TMP/input"
	start_stdin pub 60 "$TMP/input" pub "$key" --connect "$ep" --wait 10
	wait_status pub rc_pub
	wait_status sub rc_sub
	if [ "$rc_pub" = 0 ] && [ "$rc_sub" = 0 ] && expected_lines "$key" 200 | cmp -s - "$TMP/sub.out"; then
		echo "ok the node served a publisher and a subscriber: 200 of 200 messages"
		passed=$((passed + 1))
	else
		bad "the node did not serve a publisher and a subscriber: pub status $rc_pub, sub status $rc_sub, $(lines sub) of 200 messages"
	fi
}

# stops_cleanly: SIGTERM ends the node within 10 s, with status 0.
stops_cleanly() {
	local child n=0 rc=0
	child=$(pgrep -P "$node_pid" | head -n 1)
	kill -TERM "$node_pid" 2>/dev/null || true
	while [ -n "$child" ] && kill -0 "$child" 2>/dev/null && [ $n -lt 200 ]; do
		sleep 0.05
		n=$((n + 1))
	done
	if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
		bad "the node was still running 10 s after SIGTERM ($(awk '{print "state " $3}' "/proc/$child/stat" 2>/dev/null))"
		kill -KILL "$child" 2>/dev/null
	fi
	wait "$node_pid" || rc=$?
	if [ "$rc" = 0 ]; then
		echo "ok the node exited with status 0 on SIGTERM"
		passed=$((passed + 1))
	else
		bad "the node exited with status $rc on SIGTERM$([ "$rc" = 137 ] && echo ' (killed: still running 5 s after it)')"
	fi
	no_sanitizer_report "$TMP"/*.err
}

case "$CASE" in
window)
	rss0=$(rss_kb "$node")
	# both stay connected (at most 15 s) while the publisher runs: a queue
	# sized from their windows would be made when its first message comes
	nprobe=2
	"$BADPEER" --connect "$hostport" --probe --hold-ms 15000 --hello window=0x4000000000000001 \
		--send 'sub:bounds/**' >"$TMP/w62.probe" 2>"$TMP/w62.probe.err" &
	w62=$!
	PIDS+=("$w62")
	"$BADPEER" --connect "$hostport" --probe --hold-ms 15000 --hello window=0x100000000 \
		--send 'sub:bounds/**' >"$TMP/w4g.probe" 2>"$TMP/w4g.probe.err" &
	w4g=$!
	PIDS+=("$w4g")
	n=0
	while [ "$(grep -cE 'bad-[0-9]+-probe|closing ' "$TMP/node.err")" -lt 2 ] && [ $n -lt 200 ]; do
		sleep 0.05
		n=$((n + 1))
	done
	serves bounds/data
	rss1=$(rss_kb "$node")
	stops_cleanly
	wait "$w62" "$w4g" 2>/dev/null
	for name in w62 w4g; do
		got=$(verdict_of "$name")
		if [[ "$got" == closed:* ]] && grep -q 'HELLO window' <<<"$got"; then
			echo "ok $name: $got"
			passed=$((passed + 1))
		else
			bad "$name: expected the node to refuse the window with a GOODBYE naming it, got: $got"
		fi
	done
	growth=$(((rss1 - rss0) / 1024))
	echo "node RSS: $((rss0 / 1024)) MB before the probes, $((rss1 / 1024)) MB after the traffic (+$growth MB)"
	if ! $sanitized; then
		[ "$growth" -lt 50 ] || bad "the node's RSS grew by $growth MB (limit 50 MB)"
	fi
	;;
control)
	expect ctl_4096 'malformed' --send ctl:4096
	expect ctl_4097 'control frame.*4096' --send ctl:4097
	expect ctl_65536 'control frame.*4096' --send ctl:65536
	expect ctl_u32 'control frame.*4096' --send "frame:2:0:0:0:$U32"
	expect ctl_u64 'control frame.*4096' --send "frame:2:0:0:0:$U64"
	# exactly one warning for each, and it names the limit
	n=$(grep -c 'closing .*control frame of [0-9]* bytes' "$TMP/node.err")
	if [ "$n" = 4 ]; then
		echo "ok one warning naming the limit for each oversized control frame"
		passed=$((passed + 1))
	else
		bad "expected 4 warnings about an oversized control frame in the node's log, found $n"
	fi
	serves bounds/data
	stops_cleanly
	;;
values)
	W=bounds/values
	for v in 0 4095 0x2000001 $U32 0x100000000 0x4000000000000001 $U64; do
		expect "hello_window_$v" 'HELLO window' --hello "window=$v"
	done
	for v in 4096 0x2000000; do expect "hello_window_$v" ok --hello "window=$v"; done
	for v in 0 511 0x4000001 $U32 $U64; do
		expect "hello_batch_max_$v" 'HELLO batch_max' --hello "batch_max=$v"
	done
	for v in 512 0x4000000; do expect "hello_batch_max_$v" ok --hello "batch_max=$v"; done
	for v in 0 255 0x1000001 $U32 $U64; do
		expect "hello_chunk_$v" 'HELLO chunk' --hello "chunk=$v"
	done
	for v in 256 0x1000000; do expect "hello_chunk_$v" ok --hello "chunk=$v"; done
	expect hello_max_message_0 'HELLO max_message' --hello max_message=0
	for v in 1 $U32 $U64; do expect "hello_max_message_$v" ok --hello "max_message=$v"; done
	for v in 0 3600001 $U32 $U64; do
		expect "hello_keepalive_$v" 'HELLO keepalive_ms' --hello "keepalive_ms=$v"
	done
	for v in 1 3600000; do expect "hello_keepalive_$v" ok --hello "keepalive_ms=$v"; done
	for v in 3 $U32 $U64; do expect "hello_mode_$v" 'HELLO mode' --hello "mode=$v"; done
	expect hello_mode_2 ok --hello mode=2
	for v in 0 0x100001 $U32 $U64; do
		expect "open_channel_$v" 'OPEN channel' --send "open:$v:$W"
		expect "close_channel_$v" 'CLOSE channel' --send "close:$v"
		expect "credit_channel_$v" 'CREDIT channel' --send "credit:$v:0:0"
		expect "blocked_channel_$v" 'BLOCKED channel' --send "blocked:$v:0"
	done
	for v in 1 0x100000; do
		expect "open_channel_$v" ok --send "open:$v:$W"
		expect "close_channel_$v" ok --send "close:$v"
		expect "credit_channel_$v" ok --send "credit:$v:0:0"
		expect "blocked_channel_$v" ok --send "blocked:$v:0"
	done
	expect open_reliability_2 'OPEN reliability' --send "open:1:$W:2"
	expect open_reliability_u64 'OPEN reliability' --send "open:1:$W:$U64"
	for v in 0x10000000001 $U64; do
		expect "credit_bytes_$v" 'CREDIT bytes' --send "credit:1:$v:0"
		expect "blocked_bytes_$v" 'BLOCKED bytes' --send "blocked:1:$v"
	done
	for v in 0 $U32 0x10000000000; do
		expect "credit_bytes_$v" ok --send "credit:1:$v:0"
		expect "blocked_bytes_$v" ok --send "blocked:1:$v"
	done
	for v in 0x4000000000000001 $U64; do
		expect "credit_consumed_$v" 'CREDIT consumed' --send "credit:1:0:$v"
	done
	for v in 0 $U32 0x4000000000000000; do expect "credit_consumed_$v" ok --send "credit:1:0:$v"; done
	# frame headers: channel, payload length, sequence number, total
	for v in 0x100001 $U32 $U64; do
		expect "data_channel_$v" 'channel' --send "frame:0:$v:0:0:1"
	done
	expect data_channel_0 'channel 0' --send "frame:0:0:0:0:1"
	for v in 0x10001 $U32 $U64; do
		expect "data_len_$v" 'frame of [0-9]+ bytes' --send "open:1:$W" --send "frame:0:1:0:0:$v"
	done
	for v in 0 0x10000; do expect "data_len_$v" ok --send "open:1:$W" --send "frame:0:1:0:0:$v"; done
	for v in 0 1 $U32 $U64; do
		expect "data_seq_$v" ok --send "open:1:$W" --send "frame:8:1:$v:0:1"
	done
	for v in 0x4000001 $U32 $U64; do
		expect "chunk_total_$v" 'message' --send "open:1:$W" --send "frame:0x19:1:1:$v:1"
	done
	expect chunk_total_0 'bad frame header' --send "open:1:$W" --send "frame:0x19:1:1:0:1"
	expect chunk_total_max ok --send "open:1:$W" --send "frame:0x19:1:1:0x4000000:1"
	echo "ok $passed of $nprobe probes"
	serves bounds/data
	stops_cleanly
	;;
keepalive)
	# the node's deadline is 3 x 200 ms; this peer pings every 5 s, so it
	# must be given 15 s. It stays silent for 3 s (after its first PING).
	nprobe=1
	probe keepalive 3000 --hello keepalive_ms=5000
	got=$(verdict_of keepalive)
	if [ "$got" = open ] || [ "$got" = ok ]; then
		echo "ok a peer with a 5 s keepalive was not dropped on the node's 600 ms deadline"
		passed=$((passed + 1))
	else
		bad "the node dropped a peer within its own keepalive deadline, before the peer's (5 s) allowed: $got ($(grep -m1 '^probe' "$TMP/keepalive.probe"))"
	fi
	# a peer with the node's own keepalive is still dropped on time
	probe keepalive_same 10000 --hello keepalive_ms=200
	if grep -q '^probe closed=1' "$TMP/keepalive_same.probe"; then
		echo "ok a silent peer with a 200 ms keepalive was dropped: $(grep -m1 '^probe' "$TMP/keepalive_same.probe")"
		passed=$((passed + 1))
	else
		bad "a silent peer with a 200 ms keepalive was not dropped within 10 s"
	fi
	stops_cleanly
	;;
*)
	fail "unknown case $CASE"
	;;
esac
verdict "$passed"
