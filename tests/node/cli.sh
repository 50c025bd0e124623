#!/usr/bin/env bash
# The command line: --help for tern and each command, --version, and bad
# flags, numbers and keys refused with one line on stderr and status 2.
# No network is used.
TERN=$1
. "$(dirname "$0")/lib.sh"

cases=0
# expect_status STATUS REGEX_ON_STDERR args...
expect_usage_error() {
	local re=$1
	shift
	local rc=0
	"$TERN" "$@" </dev/null >"$TMP/out" 2>"$TMP/err" || rc=$?
	[ "$rc" -eq 2 ] || fail "tern $*: status $rc, expected 2 (stderr: $(cat "$TMP/err"))"
	[ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "tern $*: expected one error line, got: $(cat "$TMP/err")"
	grep -Eq -- "$re" "$TMP/err" || fail "tern $*: stderr does not match /$re/: $(cat "$TMP/err")"
	echo "ok tern $*: $(cat "$TMP/err")"
	cases=$((cases + 1))
}

"$TERN" --version >"$TMP/out" || fail "--version failed"
grep -Eq '^tern [0-9]+\.[0-9]+\.[0-9]+ \(wire protocol [0-9]+\)$' "$TMP/out" || fail "--version: $(cat "$TMP/out")"
cases=$((cases + 1))

"$TERN" --help >"$TMP/out" || fail "tern --help failed"
for c in node pub sub top bench dashboard; do
	grep -q "^  $c" "$TMP/out" || fail "tern --help does not list $c"
done
cases=$((cases + 1))

for c in node pub sub top; do
	"$TERN" $c --help >"$TMP/out" 2>"$TMP/err" || fail "tern $c --help failed"
	grep -q "^usage: tern $c" "$TMP/out" || fail "tern $c --help: no usage line"
	cases=$((cases + 1))
done
# every flag of the SPEC is in the help
for f in -c --listen --connect --mode --low-latency --batched --stats; do
	"$TERN" node --help | grep -q -- "$f" || fail "tern node --help lacks $f"
done
for f in -c --connect --listen --data --size --count --rate --low-latency --batched --best-effort; do
	"$TERN" pub --help | grep -q -- "$f" || fail "tern pub --help lacks $f"
done
for f in -c --connect --listen --count --timeout --format --stats; do
	"$TERN" sub --help | grep -q -- "$f" || fail "tern sub --help lacks $f"
done
cases=$((cases + 1))

rc=0
"$TERN" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "tern without a command: status $rc"
expect_usage_error 'unknown command "frobnicate"' frobnicate
expect_usage_error 'unknown option or missing value: --bogus' node --bogus
expect_usage_error 'unknown option or missing value: --listen' node --listen
expect_usage_error '--mode: "hub" is not peer, router or client' node --mode hub
expect_usage_error '--listen: endpoint "tcp://localhost": missing ":PORT"' node --listen tcp://localhost
expect_usage_error '--connect: endpoint "http://x:1"' sub k --connect http://x:1
expect_usage_error 'unexpected argument "extra"' node extra
expect_usage_error 'missing KEY' pub
expect_usage_error 'missing KEYEXPR' sub
expect_usage_error '--count: "-3" is not a number' pub k --count -3
expect_usage_error '--count: "ten" is not a number' sub k --count ten
expect_usage_error '--rate: "0" is not a number' pub k --rate 0
expect_usage_error '--timeout: "soon" is not a number of seconds' sub k --timeout soon
expect_usage_error '--format: "xml" is not payload, json or none' sub k --format xml
expect_usage_error '--format: "xml" is not table or json' top --format xml
expect_usage_error '--wait: "soon" is not a number of seconds' top --once --wait soon
expect_usage_error 'unexpected argument "extra"' top extra
expect_usage_error '--data and --size cannot be used together' pub k --data x --size 3
expect_usage_error '--log: "loud" is not one of' node --log loud
expect_usage_error '--size 1000 is larger than max_message_bytes' pub k --size 1000 -c <(echo '{"max_message_bytes": 999}')
# keys: a publication key has no wildcard; empty chunks and wildcards inside
# a chunk are errors naming the key
expect_usage_error 'a/\*/b' pub 'a/*/b'
expect_usage_error 'a//b' sub 'a//b'
expect_usage_error 'ab\*' sub 'ab*'
expect_usage_error '/lead' sub '/lead'
expect_usage_error 'trail/' pub 'trail/'

echo "$cases passed, 0 failed"
