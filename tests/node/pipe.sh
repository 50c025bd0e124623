#!/usr/bin/env bash
# `printf 'a\nb\n' | tern pub k` delivers two lines to a running
# `tern sub k --count 2`: through a node, directly, and over a Unix socket.
TERN=$1
. "$(dirname "$0")/lib.sh"

printf 'k\ta\nk\tb\n' >"$TMP/expected"

check_sub() {
	finish sub 0
	cmp -s "$TMP/expected" "$TMP/sub.out" || fail "$1: sub printed: $(cat -A "$TMP/sub.out")"
	[ "$(summary_field sub messages)" = 2 ] || fail "$1: sub summary: $(grep messages= "$TMP/sub.err")"
	[ "$(summary_field sub missed)" = 0 ] || fail "$1: sub missed messages"
	grep -Eq '^messages=2 bytes=2 seconds=[0-9.]+ msgs_per_s=[0-9.]+ MB_per_s=[0-9.]+$' "$TMP/pub.err" ||
		fail "$1: pub summary: $(cat "$TMP/pub.err")"
	echo "ok $1"
}

# 1. through a node, as in the README
start node 30 node --listen tcp://127.0.0.1:0
ep=$(bound node)
start sub 20 sub k --connect "$ep" --count 2 --timeout 15
printf 'a\nb\n' | timeout --foreground 20 "$TERN" pub k --connect "$ep" 2>"$TMP/pub.err" || fail "via node: pub failed: $(cat "$TMP/pub.err")"
check_sub "via node"
stop node

# 2. direct: the sub listens, the pub connects
start sub 20 sub k --listen tcp://127.0.0.1:0 --count 2 --timeout 15
ep=$(bound sub)
printf 'a\nb\n' | timeout --foreground 20 "$TERN" pub k --connect "$ep" 2>"$TMP/pub.err" || fail "direct: pub failed: $(cat "$TMP/pub.err")"
check_sub "direct tcp"

# 3. over a Unix-domain socket, the pub listening this time
sock="unix://$TMP/pub.sock"
mkfifo "$TMP/lines"
start_stdin pub 20 "$TMP/lines" pub k --listen "$sock" --wait 10
exec 3>"$TMP/lines"
wait_for "$TMP/pub.err" 'listening on unix://' 10 || fail "unix: pub is not listening"
start sub 20 sub k --connect "$sock" --count 2 --timeout 15
printf 'a\nb\n' >&3
exec 3>&-
finish pub 0
check_sub "unix socket"

echo "3 passed, 0 failed"
