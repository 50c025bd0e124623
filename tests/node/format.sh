#!/usr/bin/env bash
# What `tern sub` prints: KEY<TAB>PAYLOAD with escapes, one JSON object a
# line with --format json (text or base64), nothing with --format none; and
# how --count and --timeout end it.
TERN=$1
. "$(dirname "$0")/lib.sh"

# payloads: plain, a tab and a backslash, a control byte, invalid UTF-8, UTF-8
printf 'plain\ntab\there back\\slash\nctl\001x\nbad\377\ncaf\303\251\n' >"$TMP/input"

start sub1 20 sub 'f/**' --listen tcp://127.0.0.1:0 --count 5 --timeout 15
ep=$(bound sub1)
start sub2 20 sub 'f/*' --connect "$ep" --listen tcp://127.0.0.1:0 --format json --count 5 --timeout 15
ep2=$(bound sub2)
start sub3 20 sub f/x --connect "$ep2" --format none --count 5 --timeout 15
sleep 0.5
timeout --foreground 20 "$TERN" pub f/x --connect "$ep" --wait 10 <"$TMP/input" 2>"$TMP/pub.err" || fail "pub: $(cat "$TMP/pub.err")"
finish sub1 0

printf 'f/x\tplain\nf/x\ttab\\there back\\\\slash\nf/x\tctl\\x01x\nf/x\tbad\\xff\nf/x\tcaf\303\251\n' >"$TMP/expected"
cmp -s "$TMP/expected" "$TMP/sub1.out" || fail "payload format: $(cat -A "$TMP/sub1.out")"
echo "ok --format payload escapes"

finish sub2 0
[ "$(wc -l <"$TMP/sub2.out")" -eq 5 ] || fail "json: expected 5 lines: $(cat "$TMP/sub2.out")"
grep -q '^{"key":"f/x","payload":"plain","encoding":"utf8","seq":1,"publisher":"[^"/]*/[0-9]*"}$' "$TMP/sub2.out" ||
	fail "json: first line: $(head -n 1 "$TMP/sub2.out")"
grep -q '"payload":"tab\\there back\\\\slash","encoding":"utf8","seq":2,' "$TMP/sub2.out" || fail "json: escapes: $(sed -n 2p "$TMP/sub2.out")"
grep -q '"payload":"ctl\\u0001x","encoding":"utf8","seq":3,' "$TMP/sub2.out" || fail "json: control byte: $(sed -n 3p "$TMP/sub2.out")"
grep -q '"payload":"YmFk/w==","encoding":"base64","seq":4,' "$TMP/sub2.out" || fail "json: base64: $(sed -n 4p "$TMP/sub2.out")"
grep -q "\"payload\":\"caf$(printf '\303\251')\",\"encoding\":\"utf8\",\"seq\":5," "$TMP/sub2.out" || fail "json: utf8: $(sed -n 5p "$TMP/sub2.out")"
if command -v python3 >/dev/null 2>&1; then
	python3 -c 'import json,sys
for line in open(sys.argv[1], encoding="utf-8"):
    json.loads(line)' "$TMP/sub2.out" || fail "json: a line does not parse"
fi
echo "ok --format json"

finish sub3 0
[ ! -s "$TMP/sub3.out" ] || fail "--format none printed: $(cat "$TMP/sub3.out")"
grep -Eq '^messages=5 bytes=[0-9]+ ' "$TMP/sub3.err" || fail "--format none: summary $(cat "$TMP/sub3.err")"
echo "ok --format none"

# --timeout without --count: status 0; with --count not reached: status 1
start quiet 10 sub nothing/here --listen tcp://127.0.0.1:0 --timeout 0.5
finish quiet 0
grep -Eq '^messages=0 bytes=0 seconds=0.000 msgs_per_s=0.0 MB_per_s=0.000 missed=0$' "$TMP/quiet.err" || fail "timeout summary: $(cat "$TMP/quiet.err")"
start short 10 sub nothing/here --listen tcp://127.0.0.1:0 --timeout 0.5 --count 3
finish short 1
grep -q 'timed out after 0.5 s with 0 of 3 messages' "$TMP/short.err" || fail "count timeout: $(cat "$TMP/short.err")"
echo "ok --timeout"

# a closed stdout ends the sub quietly
start src 20 pub f/y --listen tcp://127.0.0.1:0 --data y --count 0 --rate 200 --wait 10
ep=$(bound src)
timeout --foreground -k 5 15 "$TERN" sub f/y --connect "$ep" 2>"$TMP/head.err" | head -n 1 >"$TMP/head.out"
[ "$(cat "$TMP/head.out")" = "$(printf 'f/y\ty')" ] || fail "sub | head: $(cat "$TMP/head.out")"
stop src
echo "ok sub | head -n 1"
# pub: --size N, --count with stdin, --best-effort
start sz 20 sub s/k --listen tcp://127.0.0.1:0 --count 8 --timeout 15
ep=$(bound sz)
timeout --foreground 20 "$TERN" pub s/k --connect "$ep" --size 100 --count 5 --best-effort --wait 10 2>"$TMP/pub.err" ||
	fail "pub --size: $(cat "$TMP/pub.err")"
grep -Eq '^messages=5 bytes=500 seconds=[0-9.]+ msgs_per_s=[0-9.]+ MB_per_s=[0-9.]+ dropped=0$' "$TMP/pub.err" ||
	fail "pub --size --best-effort summary: $(cat "$TMP/pub.err")"
seq 1 10 | timeout --foreground 20 "$TERN" pub s/k --connect "$ep" --count 3 --wait 10 2>"$TMP/pub.err" ||
	fail "pub --count from stdin: $(cat "$TMP/pub.err")"
grep -Eq '^messages=3 bytes=3 ' "$TMP/pub.err" || fail "pub --count 3 from stdin: $(cat "$TMP/pub.err")"
finish sz 0
[ "$(head -n 5 "$TMP/sz.out" | cut -f2 | awk '{ print length($0) }' | sort -u)" = 100 ] || fail "--size 100 payloads: $(head -n 1 "$TMP/sz.out")"
[ "$(tail -n 3 "$TMP/sz.out" | cut -f2 | tr '\n' ' ')" = "1 2 3 " ] || fail "--count 3 lines: $(tail -n 3 "$TMP/sz.out")"
echo "ok pub --size, --count, --best-effort"
echo "6 passed, 0 failed"
