#!/usr/bin/env bash
# Every kind of bad config file gets exit status 2 and one error line that
# names the file and the line:column or the key. Needs no network: each case
# runs `tern node -c FILE --check`, which validates and prints the config.
TERN=$1
EXAMPLE=$2
. "$(dirname "$0")/lib.sh"

cases=0
# expect_error LABEL CONTENT REGEX: CONTENT in a file must be refused with
# status 2 and one stderr line matching "FILE...REGEX".
expect_error() {
	local label=$1 content=$2 re=$3
	local file="$TMP/$label.json"
	local rc=0
	printf '%s' "$content" >"$file"
	"$TERN" node -c "$file" --check >"$TMP/out" 2>"$TMP/err" || rc=$?
	[ "$rc" -eq 2 ] || fail "$label: status $rc, expected 2 (stderr: $(cat "$TMP/err"))"
	[ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "$label: expected one error line, got: $(cat "$TMP/err")"
	grep -Eq -- "$re" "$TMP/err" || fail "$label: error line does not match /$re/: $(cat "$TMP/err")"
	grep -Fq -- "$file" "$TMP/err" || fail "$label: error line does not name the file: $(cat "$TMP/err")"
	[ ! -s "$TMP/out" ] || fail "$label: printed something on stdout"
	echo "ok $label: $(cat "$TMP/err")"
	cases=$((cases + 1))
}

# syntax errors: line and column
expect_error syntax_line3 $'{\n  "mode": "peer",\n  "low_latency": tru\n}\n' '\.json:3:[0-9]+: not valid JSON'
expect_error trailing_comma $'{ "mode": "peer", }' '\.json:1:[0-9]+: not valid JSON'
expect_error unclosed $'{\n  "log": "info"\n' '\.json:[23]:[0-9]+: not valid JSON'
expect_error empty '' '\.json:1:1: not valid JSON'
expect_error garbage_after $'{}\nmore' '\.json:2:1: text after the JSON object'
expect_error not_object '[1, 2]' '\.json:1:1: the config must be a JSON object'
# unknown keys (typos), at the top and nested
expect_error unknown_key '{ "low_latencey": true }' 'key "low_latencey": unknown key .*low_latency'
expect_error unknown_nested '{ "batching": { "max_byte": 1024 } }' 'key "batching.max_byte": unknown key .*max_bytes'
expect_error unknown_reconnect '{ "reconnect": { "initial": 5 } }' 'key "reconnect.initial": unknown key'
expect_error duplicate '{ "mode": "peer", "mode": "router" }' 'key "mode": appears twice'
# wrong types
expect_error bool_as_string '{ "low_latency": "yes" }' 'key "low_latency": must be true or false'
expect_error int_as_string '{ "batching": { "max_bytes": "64k" } }' 'key "batching.max_bytes": must be an integer'
expect_error object_as_int '{ "queue": 5 }' 'key "queue": must be an object'
expect_error id_as_number '{ "id": 7 }' 'key "id": must be a string'
expect_error listen_as_string '{ "listen": "tcp://127.0.0.1:7447" }' 'key "listen": must be an array'
expect_error connect_number '{ "connect": [ 7447 ] }' 'key "connect": must be an array of endpoint strings'
# values out of range
expect_error batch_too_small '{ "batching": { "max_bytes": 10 } }' 'key "batching.max_bytes": must be an integer from 512 to [0-9]+, not 10'
expect_error delay_negative '{ "batching": { "max_delay_us": -1 } }' 'key "batching.max_delay_us": must be an integer from 0'
expect_error fraction '{ "queue": { "max_bytes": 1048576.5 } }' 'key "queue.max_bytes": must be an integer'
expect_error message_zero '{ "max_message_bytes": 0 }' 'key "max_message_bytes": must be an integer from 1'
expect_error chunk_huge '{ "chunk_bytes": 1e12 }' 'key "chunk_bytes": must be an integer from 256'
expect_error reconnect_order '{ "reconnect": { "initial_ms": 5000, "max_ms": 1000 } }' 'key "reconnect.initial_ms": 5000 is larger than reconnect.max_ms'
# bad enumerations
expect_error mode_hub '{ "mode": "hub" }' 'key "mode": must be one of "peer", "router", "client"'
expect_error reliability '{ "reliability": "sometimes" }' 'key "reliability": must be "reliable" or "best_effort"'
expect_error log_verbose '{ "log": "verbose" }' 'key "log": must be one of "error", "warn", "info", "debug"'
# bad endpoints
expect_error ep_no_port '{ "listen": [ "tcp://127.0.0.1" ] }' 'key "listen": endpoint "tcp://127.0.0.1": missing ":PORT"'
expect_error ep_port_range '{ "connect": [ "tcp://127.0.0.1:70000" ] }' 'key "connect": endpoint "tcp://127.0.0.1:70000": the port must be a number'
expect_error ep_scheme '{ "connect": [ "udp://127.0.0.1:7447" ] }' 'endpoint "udp://127.0.0.1:7447": use tcp://HOST:PORT'
expect_error ep_v6_bracket '{ "listen": [ "tcp://[::1:7447" ] }' "missing '\]'"
expect_error ep_v6_bad '{ "listen": [ "tcp://[::g]:7447" ] }' 'is not an IPv6 address'
expect_error ep_v4_bad '{ "listen": [ "tcp://127.0.0.256:7447" ] }' 'is not an IPv4 address'
expect_error ep_unix_relative '{ "listen": [ "unix://tern.sock" ] }' 'a unix endpoint needs an absolute path'
# bad id
expect_error id_slash '{ "id": "a/b" }' 'key "id": id "a/b": use letters'
expect_error id_empty '{ "id": "" }' 'key "id": id "": must be 1 to'

# a file that cannot be read
rc=0
"$TERN" node -c "$TMP/missing.json" --check >/dev/null 2>"$TMP/err" || rc=$?
[ "$rc" -eq 2 ] || fail "missing file: status $rc"
grep -q "missing.json: cannot open" "$TMP/err" || fail "missing file: $(cat "$TMP/err")"
cases=$((cases + 1))

# the same validation for every command that takes -c
for cmd in "sub k" "pub k --data x"; do
	rc=0
	# shellcheck disable=SC2086
	"$TERN" $cmd -c "$TMP/mode_hub.json" >/dev/null 2>"$TMP/err" || rc=$?
	[ "$rc" -eq 2 ] || fail "tern $cmd -c bad: status $rc"
	grep -q 'key "mode": must be' "$TMP/err" || fail "tern $cmd -c bad: $(cat "$TMP/err")"
	cases=$((cases + 1))
done

# acl: rules are checked whole; a bad expression names the rule, the list and the character
expect_error acl_not_array '{ "acl": { "peer": "*" } }' 'key "acl": must be an array of rules'
expect_error acl_rule_not_object '{ "acl": ["*"] }' 'key "acl\[0\]": must be an object'
expect_error acl_no_peer '{ "acl": [{ "allow_sub": ["a"] }] }' 'key "acl\[0\]": has no "peer"'
expect_error acl_unknown_key '{ "acl": [{ "peer": "*", "allow_subs": ["a"] }] }' 'key "acl\[0\]\.allow_subs": unknown key .*allow_sub'
expect_error acl_list_type '{ "acl": [{ "peer": "*", "allow_pub": "a/**" }] }' 'key "acl\[0\]\.allow_pub": must be an array'
expect_error acl_bad_expr '{ "acl": [{ "peer": "*" }, { "peer": "x", "allow_sub": ["ok", "a/b*/c"] }] }' "acl\[1\]\.allow_sub\[1\] 'a/b\*/c' at character 3: .*whole chunk"
expect_error acl_empty_chunk '{ "acl": [{ "peer": "*", "allow_pub": ["a//b"] }] }' "acl\[0\]\.allow_pub\[0\] 'a//b' at character 3"
# unknown peer names are fine, and --check prints the rules
printf '%s' '{ "acl": [{ "peer": "nobody-has-this-name", "allow_sub": ["sensors/**"] }] }' >"$TMP/acl.json"
"$TERN" node -c "$TMP/acl.json" --check >"$TMP/acl.out" 2>"$TMP/err" || fail "acl: $(cat "$TMP/err")"
grep -q '"peer":[[:space:]]*"nobody-has-this-name"' "$TMP/acl.out" || fail "--check does not print the acl: $(cat "$TMP/acl.out")"
grep -q '"allow_sub":[[:space:]]*\["sensors/\*\*"\]' "$TMP/acl.out" || fail "--check does not print allow_sub"
cases=$((cases + 1))

# the example config loads, and has every documented key
"$TERN" node -c "$EXAMPLE" --check >"$TMP/example.out" 2>"$TMP/err" || fail "the example config does not load: $(cat "$TMP/err")"
for key in id mode listen connect low_latency batching max_bytes max_delay_us reliability \
	queue max_message_bytes chunk_bytes publish_timeout_ms slow_consumer_ms handshake_timeout_ms keepalive_ms \
	reconnect initial_ms max_ms log; do
	grep -q "\"$key\"" "$EXAMPLE" || fail "the example config lacks \"$key\""
	grep -q "\"$key\"" "$TMP/example.out" || fail "--check output lacks \"$key\""
done
cases=$((cases + 1))

# flags override the file
printf '%s' '{ "low_latency": true, "mode": "router", "listen": ["tcp://127.0.0.1:1"], "log": "debug" }' >"$TMP/base.json"
"$TERN" node -c "$TMP/base.json" --batched --mode peer --listen tcp://127.0.0.1:2 --log warn --check >"$TMP/over.out" 2>"$TMP/err" ||
	fail "override: $(cat "$TMP/err")"
grep -q '"low_latency":[[:space:]]*false' "$TMP/over.out" || fail "--batched did not override low_latency: $(cat "$TMP/over.out")"
grep -q '"mode":[[:space:]]*"peer"' "$TMP/over.out" || fail "--mode did not override mode"
grep -q '"log":[[:space:]]*"warn"' "$TMP/over.out" || fail "--log did not override log"
grep -q 'tcp://127.0.0.1:2' "$TMP/over.out" || fail "--listen did not apply"
if grep -q 'tcp://127.0.0.1:1"' "$TMP/over.out"; then fail "--listen did not replace the file's listen list"; fi
# and without flags the file's values stand
"$TERN" node -c "$TMP/base.json" --check >"$TMP/file.out" 2>"$TMP/err" || fail "base: $(cat "$TMP/err")"
grep -q '"low_latency":[[:space:]]*true' "$TMP/file.out" || fail "file low_latency lost"
grep -q '"mode":[[:space:]]*"router"' "$TMP/file.out" || fail "file mode lost"
# no listen anywhere: the default
"$TERN" node --check >"$TMP/default.out" 2>"$TMP/err" || fail "default: $(cat "$TMP/err")"
grep -q 'tcp://127.0.0.1:7447' "$TMP/default.out" || fail "default listen is not tcp://127.0.0.1:7447"
cases=$((cases + 1))

echo "$cases passed, 0 failed"
