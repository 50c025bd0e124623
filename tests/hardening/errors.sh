#!/usr/bin/env bash
# Every error a user can cause gets one clear line on stderr and a non-zero
# exit status: never a crash, a hang or a silent success.
#   unknown_flag   unknown options, missing and malformed values, unknown commands
#   bad_config     config files that are a directory, binary, deeply nested,
#                  over the size limit, or missing
#   port_in_use    a TCP port or a Unix socket that another process holds
#   unreachable    a peer where nobody listens, a host name that does not resolve
#   db_unwritable  a bench database that cannot be opened or written
#   disk_full      the bench's database on a full file system, its --out file,
#                  and stdout on a full device (/dev/full)
# Every command runs under a timeout; status 124 (the timeout) is a hang.
# Usage: errors.sh TERN CASE
TERN=$1
CASE=$2
. "$(dirname "$0")/hlib.sh"

passed=0
# A tiny bench matrix: one cell of one second, for cases that would run it.
BENCH_ONE=(--scenarios stream --links loopback --layers tcp --modes batched --records 1 --rate 0 --duration 1)

# expect LABEL WANT_STATUS REGEX SECONDS -- COMMAND...: run COMMAND (stdin
# from /dev/null, stdout to $TMP/LABEL.out unless COMMAND redirects it).
# WANT_STATUS is a number or "nonzero". Stderr, less the summary line
# (messages=...), must be exactly one line matching REGEX.
expect() {
	local label=$1 want=$2 re=$3 secs=$4
	shift 5
	local rc=0
	timeout --foreground -k 5 "$secs" "$@" </dev/null >"$TMP/$label.out" 2>"$TMP/$label.stderr" || rc=$?
	check_result "$label" "$want" "$re" "$rc" "$TMP/$label.stderr"
}

# check_result LABEL WANT REGEX RC STDERR_FILE: one case; a failure is
# counted and reported, and the other cases still run.
check_result() {
	local label=$1 want=$2 re=$3 rc=$4 errfile=$5
	if grep -Eq 'AddressSanitizer|LeakSanitizer|runtime error:' "$errfile"; then
		bad "$label: sanitizer report: $(grep -Em 3 'Sanitizer|runtime error' "$errfile")"
		return
	fi
	if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		bad "$label: hung (killed by its timeout); stderr: $(head -c 600 "$errfile")"
		return
	fi
	if [ "$rc" -ge 128 ]; then
		bad "$label: killed by signal $((rc - 128)); stderr: $(head -c 600 "$errfile")"
		return
	fi
	if [ "$want" = nonzero ] && [ "$rc" -eq 0 ]; then
		bad "$label: exit status 0, expected a failure; stderr: $(head -c 600 "$errfile")"
		return
	fi
	if [ "$want" != nonzero ] && [ "$rc" -ne "$want" ]; then
		bad "$label: exit status $rc, expected $want; stderr: $(head -c 600 "$errfile")"
		return
	fi
	grep -v '^messages=' "$errfile" >"$TMP/errlines" || true
	if [ "$(wc -l <"$TMP/errlines")" -ne 1 ]; then
		bad "$label: expected one line on stderr, got $(wc -l <"$TMP/errlines"): $(head -c 800 "$TMP/errlines")"
		return
	fi
	if ! grep -Eq -- "$re" "$TMP/errlines"; then
		bad "$label: the error line does not match /$re/: $(cat "$TMP/errlines")"
		return
	fi
	echo "ok $label (status $rc): $(cat "$TMP/errlines")"
	passed=$((passed + 1))
}

# free_port: a TCP port on 127.0.0.1 that nobody listens on (a port taken
# by a listener that is then closed: refused by the kernel from then on).
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()' 2>/dev/null ||
		echo 1
}

case "$CASE" in
unknown_flag)
	expect top_flag 2 'unknown command "--no-such-flag"' 10 -- "$TERN" --no-such-flag
	expect top_command 2 'unknown command "frobnicate"' 10 -- "$TERN" frobnicate
	for cmd in node pub sub bench dashboard; do
		args=()
		case $cmd in pub | sub) args=(k) ;; esac
		expect "${cmd}_flag" 2 "tern $cmd: .*--no-such-flag" 10 -- "$TERN" "$cmd" "${args[@]}" --no-such-flag
	done
	expect sub_missing_value 2 'tern sub: .*--count' 10 -- "$TERN" sub k --count
	expect pub_bad_rate 2 'tern pub: --rate: "abc"' 10 -- "$TERN" pub k --rate abc
	expect pub_bad_size 2 'tern pub: --size' 10 -- "$TERN" pub k --size -5
	expect sub_bad_timeout 2 'tern sub: --timeout' 10 -- "$TERN" sub k --timeout soon
	expect node_bad_mode 2 'tern node: .*hub' 10 -- "$TERN" node --mode hub
	expect node_client_listens 2 'tern node: .*client mode does not listen' 10 -- \
		"$TERN" node --mode client --listen tcp://127.0.0.1:0
	expect node_bad_endpoint 2 'tern node: .*udp://x:1' 10 -- "$TERN" node --listen udp://x:1
	expect sub_bad_keyexpr 2 'tern sub: .*a//b' 10 -- "$TERN" sub 'a//b'
	expect pub_wildcard_key 2 'tern pub: .*a/\*' 10 -- "$TERN" pub 'a/*' --data x
	expect bench_bad_link 2 'tern bench: .*nowhere' 10 -- "$TERN" bench --links nowhere
	expect bench_bad_duration 2 'tern bench: .*--duration' 10 -- "$TERN" bench --duration -1
	;;
bad_config)
	mkdir -p "$TMP/conf.d"
	printf '\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00' >"$TMP/binary.json"
	python3 -c 'import sys; sys.stdout.write("[" * 200000)' >"$TMP/deep.json"
	python3 -c 'import sys; sys.stdout.write("{\"id\": \"" + "x" * (2 * 1024 * 1024) + "\"}")' >"$TMP/huge.json"
	printf '{ "handshake_timeout_ms": 99999999999999999999999 }' >"$TMP/overflow.json"
	for cmd in node sub pub; do
		args=()
		case $cmd in pub) args=(k --data x) ;; sub) args=(k) ;; node) args=(--check) ;; esac
		expect "${cmd}_directory" 2 "tern $cmd: .*conf\\.d" 10 -- "$TERN" "$cmd" "${args[@]}" -c "$TMP/conf.d"
		expect "${cmd}_binary" 2 "tern $cmd: .*binary\\.json:1:" 10 -- "$TERN" "$cmd" "${args[@]}" -c "$TMP/binary.json"
	done
	expect deep_nesting 2 'tern node: .*deep\.json' 10 -- "$TERN" node --check -c "$TMP/deep.json"
	expect over_1MiB 2 'tern node: .*huge\.json' 10 -- "$TERN" node --check -c "$TMP/huge.json"
	expect int_overflow 2 'tern node: .*handshake_timeout_ms' 10 -- "$TERN" node --check -c "$TMP/overflow.json"
	expect missing_file 2 'tern sub: .*absent\.json: cannot open' 10 -- "$TERN" sub k -c "$TMP/absent.json"
	expect empty_path 2 'tern node: ' 10 -- "$TERN" node --check -c ''
	;;
port_in_use)
	start holder 60 node --listen tcp://127.0.0.1:0 --listen "unix://$TMP/held.sock"
	ep=$(bound holder)
	port=${ep##*:}
	expect node_tcp 1 "tern node: .*127\\.0\\.0\\.1:$port.*in use" 10 -- "$TERN" node --listen "$ep"
	expect pub_tcp 1 "tern pub: .*127\\.0\\.0\\.1:$port.*in use" 10 -- "$TERN" pub k --data x --listen "$ep"
	expect sub_tcp 1 "tern sub: .*127\\.0\\.0\\.1:$port.*in use" 10 -- "$TERN" sub k --listen "$ep"
	# libwebsockets itself leaks a few bytes when its bind fails: not ours to fix
	LSAN_OPTIONS="suppressions=$(dirname "$0")/../dashboard/lsan-lws.supp:print_suppressions=0" \
		expect dashboard_tcp 1 "tern dashboard: .*127\\.0\\.0\\.1:$port" 10 -- "$TERN" dashboard --db "$TMP/none.db" --listen "127.0.0.1:$port"
	# A Unix socket that a live node serves must not be taken over: the
	# second node fails, and the first one still accepts connections.
	expect node_unix 1 "tern node: .*held\\.sock.*in use" 10 -- "$TERN" node --listen "unix://$TMP/held.sock"
	[ -S "$TMP/held.sock" ] || bad "node_unix: the held socket file is gone"
	timeout --foreground -k 5 10 "$TERN" sub k --connect "unix://$TMP/held.sock" --count 1 --timeout 2 >/dev/null 2>"$TMP/probe.err" || true
	# the holder must have seen the probe: it logs each connection
	if wait_for "$TMP/holder.err" 'connected from ' 5; then
		echo "ok node_unix_kept: the first node still accepts on its socket"
		passed=$((passed + 1))
	else
		bad "node_unix_kept: the first node no longer accepts on its Unix socket (taken over)"
	fi
	stop holder
	;;
unreachable)
	dead=$(free_port)
	expect pub_refused nonzero "tern pub: .*127\\.0\\.0\\.1:$dead" 20 -- "$TERN" pub k --data x --wait 2 --connect "tcp://127.0.0.1:$dead"
	expect sub_refused nonzero "tern sub: .*127\\.0\\.0\\.1:$dead" 20 -- "$TERN" sub k --count 1 --timeout 2 --connect "tcp://127.0.0.1:$dead"
	expect pub_unresolvable nonzero 'no-such-host\.invalid' 20 -- "$TERN" pub k --data x --wait 2 --connect tcp://no-such-host.invalid:7447
	expect sub_unix_missing nonzero "tern sub: .*nobody\\.sock" 20 -- "$TERN" sub k --count 1 --timeout 2 --connect "unix://$TMP/nobody.sock"
	# A node keeps retrying an unreachable peer (that is its job), says so
	# once (not at every retry, and not never), and still stops cleanly.
	start lonely 30 node --listen tcp://127.0.0.1:0 --connect "tcp://127.0.0.1:$dead" --log warn
	sleep 3
	n=$(grep -c "127.0.0.1:$dead" "$TMP/lonely.err" || true)
	stop lonely
	if [ "$n" -eq 1 ]; then
		echo "ok node_retrying: one line about the unreachable peer in 3 s, stopped with status 0"
		passed=$((passed + 1))
	elif [ "$n" -eq 0 ]; then
		bad "node_retrying: in 3 s the node said nothing about its unreachable peer 127.0.0.1:$dead (at log level warn)"
	else
		bad "node_retrying: the node logged the unreachable peer $n times in 3 s (a flood): $(head -n 3 "$TMP/lonely.err")"
	fi
	;;
db_unwritable)
	mkdir -p "$TMP/adir"
	head -c 8192 /dev/urandom >"$TMP/garbage.db"
	expect db_missing_dir 1 "tern bench: .*$TMP/no/such/dir/x\\.db" 20 -- "$TERN" bench "${BENCH_ONE[@]}" --db "$TMP/no/such/dir/x.db"
	expect db_is_directory 1 "tern bench: .*adir" 20 -- "$TERN" bench "${BENCH_ONE[@]}" --db "$TMP/adir"
	expect db_not_a_database 1 'tern bench: .*garbage\.db.*not a database' 20 -- "$TERN" bench "${BENCH_ONE[@]}" --db "$TMP/garbage.db"
	# /proc is read-only even for root
	expect db_read_only_fs 1 'tern bench: .*/proc/tern-bench\.db' 20 -- "$TERN" bench "${BENCH_ONE[@]}" --db /proc/tern-bench.db
	expect out_missing_dir 1 "tern bench: .*$TMP/no/such/dir/r\\.json" 20 -- "$TERN" bench "${BENCH_ONE[@]}" --db "$TMP/ok.db" --out "$TMP/no/such/dir/r.json"
	;;
disk_full)
	# --out on a device that is always full; the run itself still goes into
	# the database, so stderr also has progress lines: the error line must
	# be there once, and the status must say it failed.
	rc=0
	timeout --foreground -k 5 60 "$TERN" bench "${BENCH_ONE[@]}" --db "$TMP/ok.db" --out /dev/full </dev/null >/dev/null 2>"$TMP/out_full.stderr" || rc=$?
	no_sanitizer_report "$TMP/out_full.stderr"
	if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then
		bad "bench_out_full: status $rc: $(cat "$TMP/out_full.stderr")"
	elif [ "$(grep -c '/dev/full' "$TMP/out_full.stderr")" -ne 1 ]; then
		bad "bench_out_full: no single error line naming /dev/full: $(cat "$TMP/out_full.stderr")"
	else
		echo "ok bench_out_full (status $rc): $(grep '/dev/full' "$TMP/out_full.stderr")"
		passed=$((passed + 1))
	fi
	# stdout on a full device: data that cannot be written is an error
	rc=0
	timeout --foreground -k 5 10 "$TERN" node --check </dev/null >/dev/full 2>"$TMP/check_full.stderr" || rc=$?
	check_result node_check_stdout_full nonzero 'tern node: .*(No space|full|write)' "$rc" "$TMP/check_full.stderr"
	start src 30 pub k --listen "unix://$TMP/src.sock" --size 8 --count 0 --rate 1000 --wait 20 --log info
	bound src >/dev/null
	rc=0
	timeout --foreground -k 5 15 "$TERN" sub k --connect "unix://$TMP/src.sock" </dev/null >/dev/full 2>"$TMP/sub_full.stderr" || rc=$?
	check_result sub_stdout_full nonzero 'tern sub: .*(No space|full|write)' "$rc" "$TMP/sub_full.stderr"
	stop src
	rc=0
	timeout --foreground -k 5 60 "$TERN" bench "${BENCH_ONE[@]}" --db "$TMP/ok2.db" </dev/null >/dev/full 2>"$TMP/bench_full.stderr" || rc=$?
	no_sanitizer_report "$TMP/bench_full.stderr"
	if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then
		bad "bench_stdout_full: status $rc: $(tail -n 3 "$TMP/bench_full.stderr")"
	elif ! grep -Eq 'No space|full|write' "$TMP/bench_full.stderr"; then
		bad "bench_stdout_full: no error line: $(cat "$TMP/bench_full.stderr")"
	else
		echo "ok bench_stdout_full (status $rc)"
		passed=$((passed + 1))
	fi
	;;
disk_full_db)
	# The database on a file system that has filled up since the last run.
	# Needs a private mount namespace for a small tmpfs.
	if [ -z "${TERN_TEST_MOUNTNS:-}" ]; then
		if unshare -m true 2>/dev/null; then
			exec env TERN_TEST_MOUNTNS=1 unshare -m bash "$0" "$@"
		fi
		skip "cannot make a mount namespace here (unshare -m needs root): no small file system to fill"
	fi
	mkdir -p "$TMP/small"
	mount -t tmpfs -o size=512k tern-full "$TMP/small" || skip "cannot mount a tmpfs: $(mount -t tmpfs -o size=512k tern-full "$TMP/small" 2>&1)"
	trap 'umount "$TMP/small" 2>/dev/null; cleanup' EXIT
	timeout --foreground -k 5 60 "$TERN" bench "${BENCH_ONE[@]}" --db "$TMP/small/b.db" </dev/null >/dev/null 2>"$TMP/first.stderr" ||
		fail "the first run on the small file system failed: $(cat "$TMP/first.stderr")"
	dd if=/dev/zero of="$TMP/small/filler" bs=4k 2>/dev/null || true
	df -k "$TMP/small" | tail -n 1
	expect db_disk_full 1 'tern bench: .*b\.db.*(disk|full|I/O)' 60 -- "$TERN" bench "${BENCH_ONE[@]}" --db "$TMP/small/b.db"
	rm -f "$TMP/small/filler"
	# with space again, the database is still usable: nothing was corrupted
	timeout --foreground -k 5 60 "$TERN" bench "${BENCH_ONE[@]}" --db "$TMP/small/b.db" </dev/null >/dev/null 2>"$TMP/again.stderr" ||
		fail "the database is unusable after the disk-full failure: $(cat "$TMP/again.stderr")"
	runs=$(sqlite3 "$TMP/small/b.db" 'SELECT count(*) FROM runs WHERE finished_at IS NOT NULL' 2>/dev/null || echo '?')
	echo "ok database usable again: $runs finished runs"
	passed=$((passed + 1))
	;;
*)
	fail "unknown case $CASE"
	;;
esac
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
