// live_test.mjs: `tern dashboard --connect` against a running network of
// real tern processes (network.mjs): the websocket's live_history and live
// messages name the three nodes, their connections and key demo/a with a
// rate; GET /metrics, read by the Prometheus project's own parser
// (prom_parse.py), has the expected families, types and labels. Then a
// dashboard without --connect: no live message, a live request refused,
// /metrics with the dashboard's own families only.

import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { check, httpGet, main, startDashboard, step, tempDir, waitFor, webModule, WsClient } from './harness.mjs';
import { explained, NODES, startLiveDashboard, startNetwork } from './network.mjs';

const { default: WebSocket } = await webModule('ws', 'index.js');
const PYTHON = process.env.TERN_PYTHON || '/usr/bin/python3';
const PARSER = join(dirname(fileURLToPath(import.meta.url)), 'prom_parse.py');

function parseMetrics(text) {
  const result = spawnSync(PYTHON, [PARSER], { input: text, encoding: 'utf8', timeout: 30000 });
  check(result.status === 0, `prom_parse.py failed (status ${result.status}): ${result.stderr || result.error}\n${text.slice(0, 2000)}`);
  return JSON.parse(result.stdout);
}

async function metrics(port) {
  const res = await httpGet(port, '/metrics', 10000);
  check(res.status === 200, `GET /metrics -> ${res.status}`);
  check(res.headers['content-type'] === 'text/plain; version=0.0.4; charset=utf-8', `content type ${res.headers['content-type']}`);
  return { text: res.body, families: parseMetrics(res.body) };
}

const family = (families, name) => families.find((f) => f.name === name);

// A live message in which every node reports, and demo/a flows at both ends.
function complete(m) {
  if (m.type !== 'live') {
    return false;
  }
  const reporting = new Set(m.nodes.filter((n) => n.reporting).map((n) => n.node));
  const key = (node, role) => m.keys.find((k) => k.node === node && k.key === 'demo/a' && k.role === role);
  return NODES.every((n) => reporting.has(n)) && key('live-P', 'pub')?.msgs_per_s > 0 && key('live-S', 'sub')?.msgs_per_s > 0 && key('live-S', 'sub')?.lat_p50_us > 0;
}

async function watchedNetwork(network) {
  const dashboard = await startLiveDashboard(join(tempDir(), 'none.db'), network);

  step('on connect: runs, then live_history, then live');
  const client = new WsClient(WebSocket, dashboard.wsUrl);
  await client.opened();
  await client.next('three messages on connect', () => client.messages.length >= 3);
  const types = client.messages.slice(0, 3).map((m) => m.type);
  check(JSON.stringify(types) === '["runs","live_history","live"]', `first messages: ${types}`);

  step('live messages name the three nodes and demo/a with a rate');
  // Reports come once a second; a loaded machine may take a while to start everything.
  const live = await explained(network, dashboard, () =>
    client.next('a live message with every node and demo/a flowing', complete, 45000).catch((error) => {
      const last = client.messages.filter((m) => m.type === 'live').pop();
      error.message += `\nthe last live message: ${JSON.stringify(last).slice(0, 3000)}`;
      throw error;
    }),
  );
  check(live.observer === dashboard.observer && live.connect[0] === network.endpoint, `observer ${live.observer}, connect ${live.connect}`);
  const router = live.nodes.find((n) => n.node === 'live-R');
  check(router.mode === 'router' && router.interval_ms === 1000, `the router: ${JSON.stringify(router).slice(0, 300)}`);
  for (const peer of ['live-S', 'live-P', dashboard.observer]) {
    check(router.connections.some((c) => c.peer === peer), `the router reports a connection to ${peer}`);
  }
  const me = live.nodes.find((n) => n.node === dashboard.observer);
  check(me && me.reporting === false && me.observer === true, `the dashboard is a silent peer: ${JSON.stringify(me)}`);
  for (const peer of ['live-P', 'live-S', dashboard.observer]) {
    const [a, b] = ['live-R', peer].sort();
    const link = live.links.find((l) => l.a === a && l.b === b);
    check(link && link.connections >= 1, `a link between live-R and ${peer}: ${JSON.stringify(live.links)}`);
  }
  const pub = live.keys.find((k) => k.node === 'live-P' && k.key === 'demo/a' && k.role === 'pub');
  check(pub.publisher.startsWith('live-P/') && pub.msgs_total > 0 && pub.t_ms > 0, `the publisher's series: ${JSON.stringify(pub)}`);
  const sub = live.keys.find((k) => k.node === 'live-S' && k.key === 'demo/a' && k.role === 'sub');
  check(sub.lat_p50_us <= sub.lat_p99_us && sub.lat_p99_us <= sub.lat_p999_us, `percentiles in order: ${JSON.stringify(sub)}`);

  step('live and live_history on request');
  const history = await client.request({ type: 'live_history', req: 1 });
  check(history.type === 'live_history' && history.capacity === 300 && history.columns[0] === 't_ms', `history: ${JSON.stringify(history).slice(0, 200)}`);
  const series = history.series.find((s) => s.node === 'live-P' && s.key === 'demo/a' && s.role === 'pub');
  check(series && series.points.length >= 1 && series.points.every((p) => p.length === history.columns.length), `demo/a's history at live-P: ${JSON.stringify(series).slice(0, 300)}`);
  const now = await client.request({ type: 'live', req: 'now' });
  check(now.type === 'live' && now.nodes.length >= 4, `live on request: ${JSON.stringify(now).slice(0, 200)}`);

  step('GET /metrics, read by a Prometheus text-format parser');
  // The latency summary needs a subscriber report with stamps; wait for one in the text too.
  let parsed;
  await waitFor(
    'a latency quantile in /metrics',
    async () => {
      parsed = await metrics(dashboard.port);
      const lat = family(parsed.families, 'tern_key_latency_seconds');
      return lat && lat.samples.some((s) => s.labels.quantile === '0.99' && typeof s.value === 'number' && s.value > 0);
    },
    30000,
    500,
  );
  const { families } = parsed;
  for (const f of families) {
    check(f.help.length > 0, `family ${f.name} has a HELP line`);
  }
  const messages = family(families, 'tern_key_messages');
  check(messages && messages.type === 'counter', `tern_key_messages_total is a counter: ${JSON.stringify(messages).slice(0, 200)}`);
  const published = messages.samples.find((s) => s.name === 'tern_key_messages_total' && s.labels.node === 'live-P' && s.labels.key === 'demo/a' && s.labels.role === 'pub');
  check(published && published.value > 0 && published.labels.publisher.startsWith('live-P/'), `messages published on live-P: ${JSON.stringify(messages.samples)}`);
  const delivered = messages.samples.find((s) => s.labels.node === 'live-S' && s.labels.role === 'sub');
  check(delivered && delivered.value > 0, 'messages delivered at live-S');
  const latency = family(families, 'tern_key_latency_seconds');
  check(latency.type === 'summary', `latency is a summary: ${latency.type}`);
  const at = latency.samples.filter((s) => s.labels.node === 'live-S' && s.labels.key === 'demo/a' && s.labels.role === 'sub');
  const quantiles = at.filter((s) => s.name === 'tern_key_latency_seconds').map((s) => s.labels.quantile).sort();
  check(JSON.stringify(quantiles) === '["0.5","0.99","0.999"]', `quantiles at live-S: ${quantiles}`);
  check(at.some((s) => s.name === 'tern_key_latency_seconds_count' && s.value > 0), `a _count at live-S: ${JSON.stringify(at)}`);
  check(!latency.samples.some((s) => s.labels.role === 'pub'), 'no latency for a publisher');
  for (const [name, type] of [
    ['tern_key_messages_per_second', 'gauge'],
    ['tern_key_bytes_per_second', 'gauge'],
    ['tern_key_drops', 'counter'],
    ['tern_key_missed', 'counter'],
    ['tern_key_blocked_seconds', 'gauge'],
    ['tern_key_queue_bytes', 'gauge'],
    ['tern_connection_rtt_seconds', 'gauge'],
    ['tern_connection_bytes_in_per_second', 'gauge'],
    ['tern_connection_bytes_out_per_second', 'gauge'],
    ['tern_node_up', 'gauge'],
    ['tern_node_uptime_seconds', 'gauge'],
    ['tern_dashboard_nodes', 'gauge'],
  ]) {
    const f = family(families, name);
    check(f && f.type === type, `family ${name} of type ${type}: ${f ? f.type : 'missing'}`);
  }
  const rate = family(families, 'tern_key_messages_per_second').samples.find((s) => s.labels.node === 'live-P' && s.labels.role === 'pub');
  check(rate && rate.value > 0, `live-P publishes demo/a at a rate: ${JSON.stringify(rate)}`);
  const up = family(families, 'tern_node_up').samples;
  for (const node of NODES) {
    check(up.some((s) => s.labels.node === node && s.value === 1), `tern_node_up for ${node}`);
  }
  check(up.some((s) => s.labels.node === 'live-R' && s.labels.mode === 'router'), 'live-R is up as a router');
  const rtt = family(families, 'tern_connection_rtt_seconds').samples;
  check(rtt.some((s) => s.labels.node === 'live-R' && s.labels.peer === 'live-P' && s.labels.endpoint && s.value > 0), `a round trip from live-R to live-P: ${JSON.stringify(rtt)}`);

  client.ws.terminate();
  await dashboard.stopCleanly();
}

async function withoutConnect() {
  const dashboard = await startDashboard(join(tempDir(), 'none.db'));
  step('without --connect: no live message, live requests refused');
  const client = new WsClient(WebSocket, dashboard.wsUrl);
  await client.opened();
  const reply = await client.request({ type: 'live_history', req: 'h' });
  check(reply.type === 'error' && reply.request === 'live_history' && reply.error.includes('--connect'), `live_history without --connect: ${JSON.stringify(reply)}`);
  // Pushes on connect come before any reply: had there been one, it is here.
  check(!client.messages.some((m) => m.type === 'live' || m.type === 'live_history'), `messages: ${client.messages.map((m) => m.type)}`);

  step('without --connect: /metrics has the dashboard\'s own families only');
  const { text, families } = await metrics(dashboard.port);
  check(text.startsWith('# ') && text.includes('--connect'), `the body says why it is short: ${text.slice(0, 200)}`);
  check(families.every((f) => f.name.startsWith('tern_dashboard_')), `families: ${families.map((f) => f.name)}`);
  check(family(families, 'tern_dashboard_nodes').samples[0].value === 0, 'no node');
  client.ws.terminate();
  await dashboard.stopCleanly();
}

await main('dashboard_live_ws', async () => {
  const probe = spawnSync(PYTHON, ['-c', 'import prometheus_client'], { encoding: 'utf8' });
  check(probe.status === 0, `${PYTHON} cannot import prometheus_client: install python3-prometheus-client (scripts/setup --test does)`);
  step('a network: router live-R, subscriber live-S, publisher live-P');
  const network = await startNetwork();
  try {
    await watchedNetwork(network);
  } finally {
    await network.stop();
  }
  await withoutConnect();
});
