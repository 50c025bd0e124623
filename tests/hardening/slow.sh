#!/usr/bin/env bash
# Slow and dead subscribers. A publisher (tern pub --listen) feeds two
# subscribers, A and B, each on its own connection.
#   best_effort        A is stopped with SIGSTOP: once A's queue is full the
#                      best-effort publisher goes on publishing, counts a
#                      drop for A for each message A cannot take (never more
#                      than it published), and B keeps receiving.
#   reliable_deadline  A is stopped with SIGSTOP while a reliable publisher
#                      sends 1000-byte messages at a fixed rate: after the
#                      slow-consumer deadline (slow_consumer_ms where the
#                      build has it, else publish_timeout_ms; 2000 here,
#                      10000 by default) the publisher closes A's connection
#                      and logs why; B receives more messages while A is
#                      stopped and not yet dropped (it is not held up behind
#                      A), and B gets every message, in order.
#   sigkill CYCLES     A is killed with SIGKILL mid-stream, started again,
#                      killed again, CYCLES times: the publisher goes on (no
#                      SIGPIPE), B keeps receiving, and the publisher's open
#                      file descriptors and RSS come back to what they were;
#                      it then exits 0 (in a sanitizer build, LeakSanitizer
#                      makes that fail if anything leaked).
# Assertions are about behaviour (order, counts, what happens before what);
# rates are printed for a reader, never judged: timing goals live in
# `tern bench`. Waits end on the event they wait for; their bounds (30 s)
# only catch a hang. Payloads are sequence numbers (stdin lines) where order
# matters, 8 bytes (--size 8) elsewhere. RSS is judged only in a normal
# build: a sanitizer's allocator keeps freed memory in quarantine.
# Usage: slow.sh TERN CASE [CYCLES]
TERN=$1
CASE=$2
CYCLES=${3:-20}
. "$(dirname "$0")/hlib.sh"

sanitized=false
if sanitizer_build "$TERN"; then
	sanitized=true
fi
passed=0

# snapshot NAME: make tern process NAME write its stats (SIGUSR1) and print
# "TIME PUBLISHED DROPPED_FOR_A SENT_TO_B": published counts sent and dropped
# messages; the per-connection figures are found by the peers' ids.
snapshot() {
	local pid before
	pid=$(tern_pid "$1")
	before=$(grep -c '^{"command"' "$TMP/$1.err")
	kill -USR1 "$pid"
	local n=0
	while [ "$(grep -c '^{"command"' "$TMP/$1.err")" -le "$before" ] && [ $n -lt 100 ]; do
		sleep 0.02
		n=$((n + 1))
	done
	grep '^{"command"' "$TMP/$1.err" | tail -n 1 | python3 -c '
import json, sys
s = json.loads(sys.stdin.read())
pub = s["pub"]
a = b = 0
for c in s["node"]["connections"]:
    d = sum(ch.get("dropped", 0) for ch in c["channels"])
    m = sum(ch.get("messages", 0) for ch in c["channels"])
    if c["peer"] == "be-a":
        a = d
    if c["peer"] == "be-b":
        b = m
print(sys.argv[1], pub["messages"] + pub["dropped"], a, b)' "$(now_s)"
}

case "$CASE" in
best_effort)
	# one publisher at full speed, without end; its counters are read with
	# both subscribers reading, then once A's queue is full, then again
	# once publishing, A's drops and B have all moved on
	ep="unix://$TMP/pub.sock"
	# a long keepalive: a stopped process does not answer pings either, and
	# would otherwise be dropped as dead after 3 s
	echo '{ "keepalive_ms": 10000 }' >"$TMP/pub.json"
	start pub 60 pub k -c "$TMP/pub.json" --listen "$ep" --best-effort --size 8 --count 0 --wait 10 --log info
	start a 60 sub k --connect "$ep" --format none --id be-a
	start b 60 sub k --connect "$ep" --format none --id be-b
	wait_for "$TMP/pub.err" 'connected from be-a' 10 || fail "A never connected to the publisher"
	wait_for "$TMP/pub.err" 'connected from be-b' 10 || fail "B never connected to the publisher"
	sleep 0.5
	read -r t1 p1 ad1 _ < <(snapshot pub)
	sleep 1
	read -r t2 p2 ad2 _ < <(snapshot pub)
	kill -STOP "$(tern_pid a)"
	# A's buffers and window fill at whatever pace the machine allows: the
	# first drop counted for A says they are full
	read -r t3 p3 ad3 bm3 < <(snapshot pub)
	ads=$ad3
	end=$((SECONDS + 30))
	while [ "$ad3" -le "$ads" ] && [ $SECONDS -le $end ]; do
		sleep 0.2
		read -r t3 p3 ad3 bm3 < <(snapshot pub)
	done
	read -r t4 p4 ad4 bm4 < <(snapshot pub)
	end=$((SECONDS + 30))
	while { [ "$p4" -le "$p3" ] || [ "$ad4" -le "$ad3" ] || [ "$bm4" -le "$bm3" ]; } &&
		[ $SECONDS -le $end ]; do
		sleep 0.2
		read -r t4 p4 ad4 bm4 < <(snapshot pub)
	done
	kill -CONT "$(tern_pid a)"
	stop pub
	stop a
	stop b
	free_rate=$(awk -v a="$p1" -v b="$p2" -v s="$t1" -v e="$t2" 'BEGIN { printf "%.0f", (b - a) / (e - s) }')
	stopped_rate=$(awk -v a="$p3" -v b="$p4" -v s="$t3" -v e="$t4" 'BEGIN { printf "%.0f", (b - a) / (e - s) }')
	a_drops=$((ad4 - ad3))
	b_rate=$(awk -v a="$bm3" -v b="$bm4" -v s="$t3" -v e="$t4" 'BEGIN { printf "%.0f", (b - a) / (e - s) }')
	echo "best effort, 8-byte messages (for a reader, not judged): published $free_rate msgs/s with both subscribers reading, $stopped_rate msgs/s with A stopped; meanwhile $a_drops drops counted for A, $b_rate msgs/s sent to B (before the stop: $((ad2 - ad1)) drops for A)"
	if [ "$p4" -gt "$p3" ]; then
		echo "ok the publisher went on publishing with A stopped and its queue full ($((p4 - p3)) messages)"
		passed=$((passed + 1))
	else
		bad "the publisher published nothing in 30 s once A's queue was full (stats: $p3 then $p4)"
	fi
	if [ "$a_drops" -le 0 ]; then
		bad "no drops counted for the stopped subscriber's connection (stats: $ad3 then $ad4)"
	elif [ "$a_drops" -gt $((p4 - p3)) ]; then
		bad "dishonest drop count: $a_drops drops counted for A while only $((p4 - p3)) messages were published"
	else
		echo "ok drops counted for the stopped subscriber: $a_drops of $((p4 - p3)) published"
		passed=$((passed + 1))
	fi
	if [ "$bm4" -gt "$bm3" ]; then
		echo "ok B kept receiving: $((bm4 - bm3)) messages sent to B meanwhile"
		passed=$((passed + 1))
	else
		bad "nothing was sent to B while A was stopped"
	fi
	;;
reliable_deadline)
	# 1000-byte messages (an 8-digit sequence number and padding), so that
	# a stopped reader fills its socket buffers and window within a second
	rate=2000
	secs=10
	total=$((rate * secs))
	deadline_ms=2000
	ep="unix://$TMP/pub.sock"
	# the deadline's config key: slow_consumer_ms where the build knows it,
	# else publish_timeout_ms, which bounds how long one publish may block
	key=publish_timeout_ms
	if echo '{ "slow_consumer_ms": 2000 }' >"$TMP/probe.json" &&
		"$TERN" node -c "$TMP/probe.json" --check >/dev/null 2>&1; then
		key=slow_consumer_ms
	fi
	# a keepalive longer than the deadline: a stopped process also stops
	# answering pings, and this test is about the slow-consumer deadline
	printf '{ "%s": %d, "keepalive_ms": 5000, "log": "info" }\n' "$key" "$deadline_ms" >"$TMP/pub.json"
	echo "deadline: $key = $deadline_ms"
	awk -v n="$total" 'BEGIN { pad = sprintf("%992s", ""); gsub(/ /, "x", pad); for (i = 1; i <= n; i++) printf "%08d%s\n", i, pad }' >"$TMP/input"
	# the stream starts once both subscribers are connected (--wait would
	# start it at the first one)
	mkfifo "$TMP/feed"
	start_stdin pub 60 "$TMP/feed" pub k -c "$TMP/pub.json" --listen "$ep" --rate "$rate" --wait 10
	(
		exec >"$TMP/feed"
		wait_for "$TMP/pub.err" 'connected from slow-a' 10 && wait_for "$TMP/pub.err" 'connected from steady-b' 10
		cat "$TMP/input"
	) &
	PIDS+=("$!")
	bound pub >/dev/null
	start a 60 sub k --connect "$ep" --format none --id slow-a
	start b 60 sub k --connect "$ep" --id steady-b --count "$total" --timeout $((secs + 20))
	pub=$(tern_pid pub)
	wait_lines b $((rate * 2)) 30
	(
		while kill -0 "$pub" 2>/dev/null; do
			echo "$(now_s) $(lines b) $(rss_kb "$pub")"
			sleep 0.25
		done
	) >"$TMP/b.samples" &
	PIDS+=("$!")
	sampler=$!
	stopped_at=$(now_s)
	kill -STOP "$(tern_pid a)"
	b_at_stop=$(lines b)
	echo "A stopped at line $b_at_stop of B"
	# B's count is read before the log is: a count read while the drop is
	# not logged yet was reached with A stopped and still connected
	closed_after=""
	b_before_drop=$b_at_stop
	while le "$(elapsed "$stopped_at")" 30; do
		b_now=$(lines b)
		if grep -v keepalive "$TMP/pub.err" | grep -Eq 'slow-a.*(slow|publish_timeout|timed out|not reading)'; then
			closed_after=$(elapsed "$stopped_at")
			break
		fi
		b_before_drop=$b_now
		sleep 0.1
	done
	if [ -n "$closed_after" ]; then
		echo "ok the publisher closed A's connection $closed_after s after A stopped: $(grep -v keepalive "$TMP/pub.err" | grep -Em 1 'slow-a.*(slow|publish_timeout|timed out|not reading)' | sed 's/^.*info: //')"
		passed=$((passed + 1))
	else
		bad "no log line on the publisher closing A's connection for being slow within 30 s of A stopping ($key $deadline_ms); its log: $(tail -n 3 "$TMP/pub.err")"
	fi
	if [ "$b_before_drop" -gt "$b_at_stop" ]; then
		echo "ok B was not held up behind A: it received $((b_before_drop - b_at_stop)) messages while A was stopped and not yet dropped"
		passed=$((passed + 1))
	else
		bad "B received nothing while A was stopped and not yet dropped (line $b_at_stop of B at the stop)"
	fi
	wait_status b rc_b
	kill -CONT "$(tern_pid a)" 2>/dev/null
	kill -TERM "$pub_pid" 2>/dev/null
	wait_status pub rc_pub
	kill "$sampler" 2>/dev/null
	wait "$sampler" 2>/dev/null
	stop a
	hwm=$(awk '{ print $3 }' "$TMP/b.samples" | sort -n | tail -n 1)
	echo "B: status $rc_b, $(lines b) lines, missed $(summary_field b missed); publisher peak RSS $((${hwm:-0} / 1024)) MB"
	if sed 's/^/k\t/' "$TMP/input" | cmp -s - "$TMP/b.out"; then
		echo "ok B received all $total messages in order"
		passed=$((passed + 1))
	else
		first=$(sed 's/^/k\t/' "$TMP/input" | cmp - "$TMP/b.out" 2>&1 | head -n 1)
		bad "B did not receive the whole stream 1..$total in order ($(lines b) lines; $first; B's line there: $(awk -v n="$(echo "$first" | sed -n 's/.*line \([0-9]*\).*/\1/p')" 'NR == n { print substr($0, 1, 10); exit }' "$TMP/b.out"))"
	fi
	# B's rate in each whole second from A's stop to the end of the stream
	read -r worst worst_at < <(awk -v t0="$stopped_at" -v total="$total" '
		{ t[NR] = $1; n[NR] = $2 }
		END {
			worst = -1
			for (i = 1; i <= NR; i++) {
				if (t[i] < t0) continue
				for (j = i; j <= NR && t[j] - t[i] < 1.0; j++) ;
				if (j > NR || n[j] >= total) break
				r = (n[j] - n[i]) / (t[j] - t[i])
				if (worst < 0 || r < worst) { worst = r; at = t[i] - t0 }
			}
			printf "%.0f %.2f\n", worst, at
		}' "$TMP/b.samples")
	echo "B's slowest second after A stopped (for a reader, not judged): $worst msgs/s at +$worst_at s (publisher rate $rate)"
	;;
sigkill)
	ep="unix://$TMP/pub.sock"
	start pub 600 pub k --listen "$ep" --size 8 --count 0 --rate 20000 --wait 10
	start b 600 sub k --connect "$ep" --format none --stats --id steady-b
	pub=$(tern_pid pub)
	# the footprint with one reader, after a first victim came and went
	start a 60 sub k --connect "$ep" --id victim
	wait_lines a 1 30
	kill -KILL "$(tern_pid a)"
	wait "$a_pid" 2>/dev/null
	# (had the publisher not noticed this death yet, fds0 would only be
	# higher: the check below could not fail for that)
	sleep 1
	fds0=$(fd_count "$pub")
	rss0=$(rss_kb "$pub")
	t0=$(now_s)
	for i in $(seq 1 "$CYCLES"); do
		rm -f "$TMP/a.out"
		start a 60 sub k --connect "$ep" --id victim
		wait_lines a 1 30
		kill -KILL "$(tern_pid a)"
		wait "$a_pid" 2>/dev/null
		kill -0 "$pub" 2>/dev/null || fail "the publisher died at cycle $i: $(tail -n 5 "$TMP/pub.err")"
	done
	echo "$CYCLES kill cycles in $(elapsed "$t0") s"
	# the publisher notices each dead connection; give it a moment
	end=$((SECONDS + 30))
	while [ "$(fd_count "$pub")" -gt "$fds0" ] && [ $SECONDS -le $end ]; do
		sleep 0.1
	done
	fds1=$(fd_count "$pub")
	rss1=$(rss_kb "$pub")
	# B still receives: a stats line written after the cycles counts some
	got0=$(grep -c '^stats sub=' "$TMP/b.err" || true)
	last_rate=""
	end=$((SECONDS + 30))
	while [ -z "$last_rate" ] && [ $SECONDS -le $end ]; do
		last_rate=$(grep '^stats sub=' "$TMP/b.err" | tail -n +$((got0 + 1)) | tr ' ' '\n' |
			grep '^msgs_per_s=' | cut -d= -f2 | awk '$1 > 0 { print; exit }')
		[ -n "$last_rate" ] || sleep 0.2
	done
	echo "publisher: fds $fds0 before, $fds1 after; RSS $((rss0 / 1024)) MB before, $((rss1 / 1024)) MB after; B's rate after the cycles ${last_rate:-none} msgs/s (for a reader, not judged)"
	if [ "$fds1" -le "$fds0" ]; then
		echo "ok no file descriptor leaked"
		passed=$((passed + 1))
	else
		bad "the publisher holds $((fds1 - fds0)) more file descriptors after $CYCLES killed subscribers"
	fi
	if $sanitized; then
		echo "sanitizer build: RSS reported, not judged (under ASan, LeakSanitizer checks the exit)"
	elif [ $(((rss1 - rss0) / 1024)) -lt 5 ]; then
		echo "ok RSS came back (+$(((rss1 - rss0) / 1024)) MB)"
		passed=$((passed + 1))
	else
		bad "the publisher's RSS grew by $(((rss1 - rss0) / 1024)) MB over $CYCLES killed subscribers"
	fi
	if [ -n "$last_rate" ]; then
		echo "ok B still receives after $CYCLES killed subscribers"
		passed=$((passed + 1))
	else
		bad "B received nothing in 30 s after $CYCLES killed subscribers"
	fi
	stop b
	# what the killed subscribers never got is reported, not hidden
	stop pub 1
	grep -q "reliable messages on 'k' were not delivered to every subscriber" "$TMP/pub.err" ||
		fail "the publisher did not say what the killed subscribers missed"
	echo "ok the publisher exited with status 1, naming what the killed subscribers missed (no SIGPIPE, no leak report)"
	passed=$((passed + 1))
	;;
*)
	fail "unknown case $CASE"
	;;
esac
no_sanitizer_report "$TMP"/*.err
verdict "$passed"
