#!/usr/bin/env bash
# Runs the README's quick start as written: the command lines of the fenced
# sh blocks under "## Quick start" (comments skipped), in a temp dir with
# this build's tern first on PATH. `tern node` and `tern sub` lines run in
# the background, the rest in the foreground, each under a timeout. Checks:
# the sub prints "demo/hello<TAB>hello, tern" three times, and the node
# started with fast.json runs its connection in low-latency mode.
# The quick start uses the default port 7447, so the test runs in a network
# namespace of its own when it can (root, unshare, ip).
# Usage: readme.sh TERN README.md
if [ -z "${TERN_TEST_NETNS:-}" ] && command -v ip >/dev/null 2>&1 &&
	unshare -n true 2>/dev/null; then
	exec env TERN_TEST_NETNS=1 unshare -n bash "$0" "$@"
fi
if [ -n "${TERN_TEST_NETNS:-}" ]; then
	ip link set lo up
fi
TERN=$1
README=$2
. "$(dirname "$0")/lib.sh"

export PATH="$(cd "$(dirname "$TERN")" && pwd):$PATH"
[ "$(command -v tern)" = "$(cd "$(dirname "$TERN")" && pwd)/tern" ] || fail "tern on PATH is not the build's"

# the command lines of the quick start's sh blocks
awk '
	/^## / { in_section = ($0 == "## Quick start") ; next }
	in_section && /^```sh[[:space:]]*$/ { in_block = 1; next }
	in_section && /^```/ { in_block = 0; next }
	in_section && in_block && !/^[[:space:]]*#/ && NF > 0 { print }
' "$README" >"$TMP/commands"
echo "quick start commands:"
sed 's/^/  /' "$TMP/commands"
for want in "tern node" "tern sub 'demo/**'" "tern pub demo/hello --data 'hello, tern' --count 3" \
	"echo '{ \"low_latency\": true }' > fast.json" "tern node -c fast.json"; do
	grep -qxF -- "$want" "$TMP/commands" || fail "the quick start lacks the line: $want"
done

cd "$TMP" || fail "no temp dir"
nodes=0
subs=0
current_node=""
# run_line LINE: background for tern node / tern sub, foreground otherwise
run_line() {
	local line=$1
	case "$line" in
	"tern node"*)
		# one node at a time on 7447: stop the previous one first
		if [ -n "$current_node" ]; then
			stop "$current_node"
		fi
		nodes=$((nodes + 1))
		current_node="node$nodes"
		timeout --foreground -k 5 40 bash -c "exec $line" >"$TMP/$current_node.out" 2>"$TMP/$current_node.err" &
		PIDS+=("$!")
		printf -v "${current_node}_pid" '%s' "$!"
		wait_for "$TMP/$current_node.err" 'listening on tcp://127.0.0.1:7447' 10 ||
			fail "'$line' is not listening on tcp://127.0.0.1:7447"
		;;
	"tern sub"*)
		subs=$((subs + 1))
		timeout --foreground -k 5 40 bash -c "exec $line" >"$TMP/sub$subs.out" 2>"$TMP/sub$subs.err" &
		PIDS+=("$!")
		printf -v "sub${subs}_pid" '%s' "$!"
		;;
	*)
		timeout --foreground -k 5 20 bash -c "$line" >"$TMP/fg.out" 2>"$TMP/fg.err" </dev/null ||
			fail "'$line' failed: $(cat "$TMP/fg.err")"
		;;
	esac
}

while IFS= read -r line; do
	run_line "$line"
	case "$line" in
	"tern pub"*)
		printf 'demo/hello\thello, tern\n%.0s' 1 2 3 >"$TMP/expected"
		end=$((SECONDS + 10))
		while [ "$(wc -l <"$TMP/sub1.out")" -lt 3 ] && [ $SECONDS -le $end ]; do
			sleep 0.05
		done
		cmp -s "$TMP/expected" "$TMP/sub1.out" || fail "the sub printed: $(cat -A "$TMP/sub1.out")"
		echo "ok: the sub printed 'demo/hello<TAB>hello, tern' three times"
		# the pipe example, against the same node, with the default endpoint
		timeout --foreground -k 5 20 tern sub k --count 2 >"$TMP/pipe.out" 2>"$TMP/pipe.err" &
		pipe_sub=$!
		PIDS+=("$pipe_sub")
		printf 'a\nb\n' | timeout --foreground -k 5 20 tern pub k 2>"$TMP/pipe-pub.err" || fail "printf | tern pub k failed"
		wait "$pipe_sub" || fail "tern sub k --count 2 failed: $(cat "$TMP/pipe.err")"
		[ "$(cat "$TMP/pipe.out")" = "$(printf 'k\ta\nk\tb')" ] || fail "tern sub k printed: $(cat -A "$TMP/pipe.out")"
		echo "ok: printf 'a\\nb\\n' | tern pub k reached tern sub k --count 2"
		;;
	esac
done <"$TMP/commands"

[ "$nodes" -eq 2 ] || fail "expected two tern node lines, ran $nodes"
grep -q '"low_latency"' "$TMP/fast.json" || fail "fast.json was not written"
# a connection to the fast node: it must run in low-latency mode
timeout --foreground -k 5 20 tern sub 'demo/**' --count 1 --timeout 10 >"$TMP/lowlat.out" 2>"$TMP/lowlat.err" &
PIDS+=("$!")
wait_for "$TMP/$current_node.err" 'connected .*low-latency mode' 10 ||
	fail "the node started with fast.json did not log a low-latency connection"
grep 'connected .*low-latency mode' "$TMP/$current_node.err" | head -n 1
if grep -q 'connected .*batched mode' "$TMP/$current_node.err"; then
	fail "the node started with fast.json has a batched connection"
fi
echo "ok: tern node -c fast.json runs its connection in low-latency mode"
timeout --foreground 5 tern pub demo/hello --data done >/dev/null 2>&1 || true
stop "$current_node"
echo "3 passed, 0 failed"
