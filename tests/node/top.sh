#!/usr/bin/env bash
# `tern top` watching a chain: publisher P -> router R <- subscriber S.
#  - --once --format json: one object with all three nodes, R's connections,
#    P's key as pub and S's as sub with its latency fields;
#  - --once: a table naming the three nodes and the key;
#  - without --once, --format json: one object a line, ended by SIGTERM
#    with status 0;
#  - on a terminal (a pty from script(1), when installed): q quits with
#    status 0, and so does SIGTERM, each leaving the terminal's settings as
#    they were and the screen restored;
#  - --help, and nothing to connect to (status 1, one line).
# Needs node (Node.js) to read the JSON; without it the test is skipped.
# Usage: top.sh TERN
TERN=$1
. "$(dirname "$0")/lib.sh"
command -v node >/dev/null 2>&1 || { echo "SKIP: no node (Node.js) to read JSON"; exit 77; }

cases=0

# --help and the command line
"$TERN" top --help >"$TMP/help.out" 2>&1 || fail "tern top --help failed"
grep -q '^usage: tern top' "$TMP/help.out" || fail "tern top --help: no usage line"
for f in -c --connect --listen --once --format --wait; do
	grep -q -- "$f" "$TMP/help.out" || fail "tern top --help lacks $f"
done
echo "ok tern top --help (cli.sh checks bad flags)"
cases=$((cases + 1))

# nothing at the endpoint: status 1 and one line that says why
rc=0
timeout --foreground -k 5 30 "$TERN" top --once --connect "unix://$TMP/nobody.sock" --wait 0.5 \
	>"$TMP/none.out" 2>"$TMP/none.err" || rc=$?
[ "$rc" -eq 1 ] || fail "top with nothing listening: status $rc, expected 1"
[ "$(wc -l <"$TMP/none.err")" -eq 1 ] || fail "top with nothing listening: $(cat "$TMP/none.err")"
grep -q "^tern top: cannot connect to unix://$TMP/nobody.sock" "$TMP/none.err" ||
	fail "top with nothing listening: $(cat "$TMP/none.err")"
[ ! -s "$TMP/none.out" ] || fail "top with nothing listening printed: $(cat "$TMP/none.out")"
echo "ok nothing listening: $(cat "$TMP/none.err")"
cases=$((cases + 1))

start router 120 node --mode router --listen tcp://127.0.0.1:0 --id top-R
R=$(bound router)
start sub 120 sub 'demo/**' --connect "$R" --format none --id top-S
wait_for "$TMP/router.err" 'connected from top-S' 20 || fail "S did not connect"
# 1000 messages/s for as long as the test runs
start pub 120 pub demo/a --connect "$R" --size 64 --rate 1000 --count 110000 --id top-P
wait_for "$TMP/router.err" 'connected from top-P' 20 || fail "P did not connect"

# --once --format json. The wait is longer than the default, for a busy
# machine: it changes when top prints, never what.
timeout --foreground -k 5 60 "$TERN" top --once --format json --connect "$R" --wait 4 \
	>"$TMP/once.json" 2>"$TMP/once.err" || fail "top --once --format json: $(cat "$TMP/once.err")"
[ "$(wc -l <"$TMP/once.json")" -eq 1 ] || fail "--once --format json: not one line: $(cat "$TMP/once.json")"
node - "$TMP/once.json" <<'JS' || fail "top --once --format json checks failed: $(cat "$TMP/once.json")"
const fs = require('fs');
const snap = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const need = (ok, what) => { if (!ok) { console.error('FAIL: ' + what); process.exit(1); } };
need(Number.isInteger(snap.time_us) && Math.abs(snap.time_us / 1000 - Date.now()) < 600000, `time_us ${snap.time_us}`);
need(Array.isArray(snap.nodes), 'nodes is an array');
const by = Object.fromEntries(snap.nodes.map((n) => [n.node, n]));
// three nodes report; the observer itself does not
need(snap.nodes.length === 3 && by['top-P'] && by['top-R'] && by['top-S'], `nodes: ${Object.keys(by)}`);
need(by['top-R'].mode === 'router', `R's mode ${by['top-R'].mode}`);
const peers = by['top-R'].connections.map((c) => c.peer);
for (const p of ['top-P', 'top-S']) need(peers.includes(p), `R's connections ${peers} lack ${p}`);
const pub = by['top-P'].keys.find((k) => k.key === 'demo/a' && k.role === 'pub');
need(pub && pub.msgs_total > 0, `P's keys: ${JSON.stringify(by['top-P'].keys)}`);
const sub = by['top-S'].keys.find((k) => k.key === 'demo/a' && k.role === 'sub');
need(sub && sub.msgs_total > 0, `S's keys: ${JSON.stringify(by['top-S'].keys)}`);
for (const f of ['lat_p50_us', 'lat_p99_us', 'lat_p999_us', 'lat_max_us', 'lat_samples']) need(f in sub, `S's key lacks ${f}`);
console.log(`ok --once --format json: ${snap.nodes.length} nodes, R's peers ${peers.join(' ')}, S p50 ${sub.lat_p50_us} us`);
JS
cases=$((cases + 1))

# --once: the table
timeout --foreground -k 5 60 "$TERN" top --once --connect "$R" --wait 4 \
	>"$TMP/once.txt" 2>"$TMP/once.err" || fail "top --once: $(cat "$TMP/once.err")"
grep -Eq '^tern top  [0-9:]+  nodes 3  connections [0-9]+  msgs/s ' "$TMP/once.txt" ||
	fail "top --once: header: $(head -n 1 "$TMP/once.txt")"
for n in top-P top-R top-S; do
	grep -Eq "^$n +(peer|router) " "$TMP/once.txt" || fail "top --once lacks node $n: $(cat "$TMP/once.txt")"
done
grep -Eq '^top-P +demo/a +pub ' "$TMP/once.txt" || fail "top --once lacks P's key: $(cat "$TMP/once.txt")"
grep -Eq '^top-S +demo/a +sub ' "$TMP/once.txt" || fail "top --once lacks S's key: $(cat "$TMP/once.txt")"
grep -Eq '^top-R -> top-P ' "$TMP/once.txt" || fail "top --once lacks R's connection: $(cat "$TMP/once.txt")"
if grep -q $'\033' "$TMP/once.txt"; then
	fail "top --once into a file wrote escape sequences"
fi
echo "ok --once table"
cat "$TMP/once.txt"
cases=$((cases + 1))

# live JSON lines, ended by SIGTERM
start live 60 top --format json --connect "$R"
end=$((SECONDS + 30))
while [ "$(grep -c '"top-S"' "$TMP/live.out")" -lt 2 ] && [ $SECONDS -lt $end ]; do
	sleep 0.1
done
stop live 0
node - "$TMP/live.out" <<'JS' || fail "live --format json lines: $(cat "$TMP/live.out")"
const lines = require('fs').readFileSync(process.argv[2], 'utf8').split('\n').filter((l) => l);
const seen = lines.map((l) => JSON.parse(l)).filter((s) => s.nodes.some((n) => n.node === 'top-S'));
if (seen.length < 2) { console.error(`FAIL: ${seen.length} lines name top-S`); process.exit(1); }
console.log(`ok live --format json: ${lines.length} lines`);
JS
cases=$((cases + 1))

# On a terminal. script(1) gives top a pty; the command around it saves the
# terminal's settings before and after. $1: how to end it (q or TERM).
on_terminal() {
	local how=$1
	local dir="$TMP/tty-$how"
	mkdir "$dir"
	mkfifo "$dir/keys"
	timeout --foreground -k 5 60 script -qfec \
		"stty -g >'$dir/before'; sh -c 'echo \$\$ >\"$dir/pid\"; exec \"$TERN\" top --connect \"$R\"'; echo \$? >'$dir/status'; stty -g >'$dir/after'" \
		"$dir/typescript" <"$dir/keys" >/dev/null 2>&1 &
	local script_pid=$!
	PIDS+=("$script_pid")
	exec 3>"$dir/keys"
	wait_for "$dir/typescript" 'top-S' 30 || { exec 3>&-; fail "top on a pty drew no report ($how): $(cat -v "$dir/typescript" | tail -c 2000)"; }
	if [ "$how" = q ]; then
		printf q >&3
	else
		kill -TERM "$(cat "$dir/pid")"
	fi
	local end=$((SECONDS + 20))
	while [ ! -s "$dir/after" ] && [ $SECONDS -lt $end ]; do
		sleep 0.05
	done
	exec 3>&-
	wait "$script_pid" || true
	[ -s "$dir/after" ] || fail "top on a pty did not end on $how: $(cat -v "$dir/typescript" | tail -c 2000)"
	[ "$(cat "$dir/status")" = 0 ] || fail "top on a pty ended by $how: status $(cat "$dir/status")"
	cmp -s "$dir/before" "$dir/after" || fail "terminal settings changed by top ($how): $(cat "$dir/before") -> $(cat "$dir/after")"
	grep -q $'\033\\[?1049l' "$dir/typescript" || fail "top ($how) did not leave the alternate screen"
	grep -q $'\033\\[?25h' "$dir/typescript" || fail "top ($how) did not show the cursor again"
	echo "ok on a terminal: $how quits with status 0, terminal restored"
	cases=$((cases + 1))
}
if command -v script >/dev/null 2>&1 && command -v stty >/dev/null 2>&1; then
	on_terminal q
	on_terminal TERM
else
	echo "no script(1): the terminal cases are left out"
fi

stop pub 0
stop sub
stop router
echo "$cases passed, 0 failed"
