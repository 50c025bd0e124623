#!/usr/bin/env bash
# Telemetry from a chain: publisher P -> router R -> subscriber S, seen by a
# fourth process, `tern sub '@tern/**' --format json`. Each node reports on
# @tern/ID/stats: P its key with a rate within 10 % of what it sends, S the
# same key with latency percentiles, R its connections. A subscriber to
# '**' on the same router gets the data but never a telemetry message.
# Needs node (Node.js) to read the JSON; without it the test is skipped.
# Usage: telemetry.sh TERN
TERN=$1
. "$(dirname "$0")/lib.sh"
command -v node >/dev/null 2>&1 || { echo "SKIP: no node (Node.js) to read JSON"; exit 77; }

RATE=2000
start router 60 node --mode router --listen tcp://127.0.0.1:0 --id tele-R
R=$(bound router)
start watch 60 sub '@tern/**' --connect "$R" --format json --id tele-W
start all 60 sub '**' --connect "$R" --format json --id tele-A
start sub 60 sub 'demo/**' --connect "$R" --format none --id tele-S
wait_for "$TMP/router.err" 'connected from tele-S' 10 || fail "S did not connect"
wait_for "$TMP/router.err" 'connected from tele-W' 10 || fail "W did not connect"
# 8 s of messages: reports from the middle cover whole seconds of sending
start pub 60 pub demo/a --connect "$R" --size 64 --rate $RATE --count $((RATE * 8)) --id tele-P
finish pub
stop sub
stop all
stop watch
stop router

# what '**' received: data, and nothing under '@'
grep -q '"key":"demo/a"' "$TMP/all.out" || fail "'**' received no data"
if grep -q '"key":"@' "$TMP/all.out"; then
	fail "'**' received a telemetry message: $(grep -m1 '"key":"@' "$TMP/all.out")"
fi

node - "$TMP/watch.out" "$RATE" <<'JS' || fail "telemetry checks failed"
const fs = require('fs');
const [file, rate] = [process.argv[2], Number(process.argv[3])];
const reports = {};
for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
  if (!line) continue;
  const m = JSON.parse(line);
  const r = JSON.parse(m.payload);
  if (m.key !== `@tern/${r.node}/stats`) throw new Error(`report of ${r.node} on ${m.key}`);
  (reports[r.node] = reports[r.node] || []).push(r);
}
const need = (ok, what) => { if (!ok) { console.error('FAIL: ' + what); process.exit(1); } };
for (const n of ['tele-P', 'tele-R', 'tele-S']) need(reports[n] && reports[n].length >= 3, `reports from ${n}: ${reports[n] ? reports[n].length : 0}`);
const key = (r, role) => r.keys.find((k) => k.key === 'demo/a' && k.role === role);
// the publisher's rate, in the reports whose whole interval was spent sending
const pubRates = reports['tele-P'].map((r) => key(r, 'pub')).filter((k) => k && k.msgs_total > rate && k.msgs_total < rate * 7).map((k) => k.msgs_per_s);
need(pubRates.length >= 2, `publisher reports in mid-stream: ${pubRates.length}`);
const median = pubRates.sort((a, b) => a - b)[Math.floor(pubRates.length / 2)];
need(Math.abs(median - rate) <= rate * 0.1, `publisher's reported rate ${median}/s, sent ${rate}/s`);
// the subscriber's latency, publish to delivery through the router
const lat = reports['tele-S'].map((r) => key(r, 'sub')).filter((k) => k && k.lat_samples > 0);
need(lat.length >= 2, `subscriber reports with latency: ${lat.length}`);
for (const k of lat) {
  need(k.lat_p50_us > 0 && k.lat_p50_us <= k.lat_p99_us && k.lat_p99_us <= k.lat_p999_us && k.lat_p999_us <= k.lat_max_us,
    `percentiles in order: ${JSON.stringify(k)}`);
  need(k.lat_p50_us < 5e6, `p50 below 5 s on one host: ${k.lat_p50_us}`);
}
need(lat.some((k) => k.msgs_per_s > rate * 0.5), 'subscriber rate');
// the router: its three peers, each with a round trip
const rc = reports['tele-R'][reports['tele-R'].length - 2].connections.map((c) => c.peer);
for (const p of ['tele-P', 'tele-S', 'tele-W']) need(rc.includes(p), `router's connections ${rc} lack ${p}`);
need(reports['tele-R'].every((r) => r.mode === 'router'), 'router mode');
// telemetry never reports on telemetry
need(Object.values(reports).flat().every((r) => r.keys.every((k) => !k.key.startsWith('@'))), 'no @ keys in reports');
console.log(`ok: publisher ${median}/s of ${rate}/s; subscriber p50 ${lat[1].lat_p50_us} us, p99 ${lat[1].lat_p99_us} us over ${lat[1].lat_samples} stamps`);
JS
echo "ok telemetry"
