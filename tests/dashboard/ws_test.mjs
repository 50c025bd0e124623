// ws_test.mjs: the dashboard's HTTP files and every websocket message type:
// runs/run/trend/compare requests and their errors, the pushes while a run is
// written (run_added, result, run_updated), a missing database, and the
// refusals: a foreign Origin, a path other than /ws, a message over 64 KiB.
// The compare reply is checked against `tern bench compare --format json`.

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { check, httpGet as get, main, runTern, startDashboard, step, tempDir, waitFor, webModule, WsClient } from './harness.mjs';
import { cellCount, cells, createDatabase, finishedRun, insertResult, insertRun, LINKS, runSqlite, SIZES, XSS_NOTE } from './fixture.mjs';

const { default: WebSocket } = await webModule('ws', 'index.js');
const LIMIT = 64 * 1024;

// Connects and expects the upgrade to be refused (no open event).
async function expectRefusedUpgrade(what, url, options) {
  const ws = new WebSocket(url, options);
  const outcome = await new Promise((resolve) => {
    const timer = setTimeout(() => resolve('timeout'), 5000);
    ws.on('open', () => {
      clearTimeout(timer);
      resolve('open');
    });
    ws.on('error', () => {
      clearTimeout(timer);
      resolve('refused');
    });
  });
  ws.terminate();
  check(outcome === 'refused', `${what}: the upgrade should be refused, got ${outcome}`);
}

// Runs 1 and 2 have the same samples, 3 repeats a cell; run 3 is half as fast
// in every cell, on another kernel. The dashboard's verdicts must be the CLI's.
async function compareRepeats(dir) {
  const db = join(dir, 'repeats.db');
  createDatabase(db);
  runSqlite(db, finishedRun(1, 'before', 1, { repeats: 3, seed: 7 }));
  runSqlite(db, finishedRun(2, 'the same again', 1, { repeats: 3, seed: 7 }));
  runSqlite(db, finishedRun(3, 'half as fast', 0.5, { repeats: 3, seed: 7, environment: { kernel: 'Linux 6.19.0 x86_64' } }));
  const dashboard = await startDashboard(db);
  const client = new WsClient(WebSocket, dashboard.wsUrl);
  await client.opened();
  await client.next('the list of runs', (m) => m.type === 'runs');
  const count = cellCount(cells(1));

  const run = await client.request({ type: 'run', run_id: 1, req: 'run' });
  check(run.results.length === 3 * count, `a run with 3 repeats has 3 rows a cell: ${run.results.length} rows, ${count} cells`);
  check(run.run.kernel === 'Linux 6.18.44 x86_64' && run.run.tern_commit === 'c2712b9' && run.run.env.governor === 'performance', `the run carries its environment: ${JSON.stringify(run.run)}`);
  const trend = await client.request({ type: 'trend', link: 'loopback', layer: 'tern', mode: 'batched', records_per_msg: 16, req: 'trend' });
  check(trend.points.length === 9 && JSON.stringify(trend.points.map((p) => [p.run_id, p.repeat])) === JSON.stringify([1, 2, 3].flatMap((r) => [[r, 0], [r, 1], [r, 2]])), `a trend point per row, each with its repeat: ${JSON.stringify(trend.points.map((p) => [p.run_id, p.repeat]))}`);

  const same = await client.request({ type: 'compare', a: 1, b: 2, req: 'same' });
  check(same.cells.length === count && same.summary.cells === count, `compare 1 2: ${count} cells, got ${same.cells.length}`);
  check(same.summary.regressions === 0 && same.summary.improvements === 0 && same.summary.same === count, `identical samples: no verdict: ${JSON.stringify(same.summary)}`);
  check(same.cells.every((c) => c.verdict === 'same' && c.tested && c.a.n === 3 && c.b.n === 3), 'every cell tested over 3 samples a side, and the same');
  check(same.environment.length === 0, `the same environment: ${JSON.stringify(same.environment)}`);

  const half = await client.request({ type: 'compare', a: 1, b: 3, req: 'half' });
  check(half.summary.regressions === count && half.summary.improvements === 0, `half as fast: every cell a regression: ${JSON.stringify(half.summary)}`);
  const cell = half.cells.find((c) => c.link === 'loopback' && c.layer === 'tern' && c.mode === 'batched' && c.records_per_msg === 16);
  check(cell && cell.verdict === 'regression' && cell.p < 0.01 && Math.abs(cell.change_pct + 50) < 0.5, `loopback tern batched 16: ${JSON.stringify(cell)}`);
  check(half.environment.length === 1 && half.environment[0].name === 'kernel' && half.environment[0].b === 'Linux 6.19.0 x86_64', `the kernel differs: ${JSON.stringify(half.environment)}`);

  // The same report as the command's, cell for cell (when tern has its bench).
  const hasBench = runTern(['bench', '--help']).status === 0;
  if (!hasBench) {
    console.log('note: `tern bench --help` fails: the report is not checked against `tern bench compare`');
  }
  for (const [a, b, reply, status] of hasBench ? [[1, 2, same, 0], [1, 3, half, 3]] : []) {
    const cli = runTern(['bench', 'compare', String(a), String(b), '--db', db, '--format', 'json']);
    check(cli.status === status, `tern bench compare ${a} ${b} exits ${status}, got ${cli.status}: ${cli.stderr}`);
    const report = JSON.parse(cli.stdout);
    const strip = ({ type, req, ...rest }) => rest;
    check(JSON.stringify(strip(reply)) === JSON.stringify(report), `the dashboard's report for ${a} ${b} is the command's:\n${JSON.stringify(strip(reply)).slice(0, 400)}\n${JSON.stringify(report).slice(0, 400)}`);
  }
  client.close();
  await dashboard.stopCleanly();
}

await main('dashboard_ws', async () => {
  const dir = tempDir();
  const db = join(dir, 'bench.db');
  createDatabase(db);
  runSqlite(db, finishedRun(1, XSS_NOTE));
  runSqlite(db, finishedRun(2, 'second'));
  const dashboard = await startDashboard(db);
  const port = dashboard.port;

  step('static files with their MIME types');
  const index = await get(port, '/');
  check(index.status === 200 && index.headers['content-type'].startsWith('text/html'), `GET / -> ${index.status} ${index.headers['content-type']}`);
  check(index.body.includes('app.js'), 'the page loads app.js');
  check(/default-src 'self'/.test(index.headers['content-security-policy'] || ''), 'a Content-Security-Policy limits the page to its own server');
  for (const [path, type] of [['/app.js', 'javascript'], ['/style.css', 'text/css'], ['/vendor/chart.umd.min.js', 'javascript']]) {
    const res = await get(port, path);
    check(res.status === 200, `GET ${path} -> ${res.status}`);
    check((res.headers['content-type'] || '').includes(type), `GET ${path} should be ${type}, is ${res.headers['content-type']}`);
  }
  check((await get(port, '/no-such-file.js')).status === 404, 'a missing file is a 404');
  const traversal = await get(port, '/../../../../etc/passwd');
  check(traversal.status !== 200 && !traversal.body.includes('root:'), 'no file outside web/ is served');

  step('on connect: the list of runs');
  const client = new WsClient(WebSocket, dashboard.wsUrl);
  await client.opened();
  const hello = await client.next('the list of runs on connect', (m) => m.type === 'runs');
  check(hello.db.state === 'ready' && hello.db.path === db, `db description: ${JSON.stringify(hello.db)}`);
  check(hello.runs.length === 2 && hello.runs[0].id === 2 && hello.runs[1].id === 1, 'two runs, newest first');
  check(hello.runs[1].note === XSS_NOTE, 'the note arrives exactly as stored');
  check(hello.runs[0].status === 'finished' && hello.runs[0].results === cells(2).length, `run 2 summary: ${JSON.stringify(hello.runs[0])}`);

  step('runs, run and trend requests');
  const runs = await client.request({ type: 'runs', req: 'list' });
  check(runs.type === 'runs' && runs.runs.length === 2, 'runs on request');
  const run = await client.request({ type: 'run', run_id: 1, req: 2 });
  check(run.type === 'run' && run.run_id === 1 && run.run.id === 1, 'run reply');
  check(run.links.length === LINKS.length, `run 1 has ${LINKS.length} links, got ${run.links.length}`);
  check(run.results.length === cells(1).length, `run 1 has ${cells(1).length} results, got ${run.results.length}`);
  check(run.run.config && run.run.config.quick === true, 'the configuration arrives as JSON');
  const lan = run.results.find((r) => r.link === 'lan' && r.layer === 'tcp' && r.mode === 'lowlat' && r.records_per_msg === SIZES[2]);
  check(lan && lan.records_per_s > 0 && lan.link_share > 0, 'a result carries its figures');
  const trend = await client.request({ type: 'trend', scenario: 'stream', link: 'wifi', layer: 'tern', mode: 'batched', records_per_msg: 16, req: 3 });
  check(trend.type === 'trend' && trend.points.length === 2, `trend has a point per run: ${JSON.stringify(trend).slice(0, 200)}`);
  check(trend.points[0].run_id === 1 && trend.points[1].run_id === 2, 'trend points, oldest run first');
  check(trend.cell.link === 'wifi' && trend.cell.records_per_msg === 16, 'the trend names its cell');

  step('compare: one sample a side is never a verdict');
  const single = await client.request({ type: 'compare', a: 1, b: 2, req: 4 });
  check(single.type === 'compare' && single.a === 1 && single.b === 2, `compare reply: ${JSON.stringify(single).slice(0, 200)}`);
  check(single.cells.length === cells(1).length && single.summary.untested === single.cells.length, `every cell untested: ${JSON.stringify(single.summary)}`);
  check(single.cells.every((c) => c.verdict === 'same' && !c.tested && c.p === null && c.a.n === 1 && c.b.n === 1), 'untested cells are "same", without a p-value');
  check(single.summary.regressions === 0 && single.summary.improvements === 0, `no verdicts: ${JSON.stringify(single.summary)}`);

  step('errors');
  for (const [request, mentions] of [
    [{ type: 'nope', req: 10 }, 'unknown message type'],
    [{ type: 'run', run_id: 999, req: 11 }, 'no run 999'],
    [{ type: 'run', run_id: 'one', req: 12 }, 'run_id'],
    [{ type: 'trend', link: 'lan', req: 13 }, 'layer'],
  ]) {
    const reply = await client.request(request);
    check(reply.type === 'error' && reply.error.includes(mentions), `${JSON.stringify(request)} -> ${JSON.stringify(reply)}`);
  }
  for (const [request, mentions] of [
    [{ type: 'compare', a: 1, req: 14 }, '"b"'],
    [{ type: 'compare', a: 1, b: 'two', req: 15 }, 'positive integers'],
    [{ type: 'compare', a: 1, b: 999, req: 16 }, 'no run 999'],
  ]) {
    const reply = await client.request(request);
    check(reply.type === 'error' && reply.request === 'compare' && reply.error.includes(mentions), `${JSON.stringify(request)} -> ${JSON.stringify(reply)}`);
  }
  const before = client.messages.length;
  client.ws.send('{ not json');
  const badJson = await client.next('the error for bad JSON', (m) => client.messages.indexOf(m) >= before && m.type === 'error');
  check(badJson.error.includes('JSON'), `bad JSON: ${badJson.error}`);

  step('a message of exactly 64 KiB is served');
  const head = JSON.stringify({ type: 'runs', req: 'big', pad: '' });
  const exact = head.replace('"pad":""', `"pad":"${'x'.repeat(LIMIT - head.length)}"`);
  check(Buffer.byteLength(exact) === LIMIT, 'test message is 64 KiB');
  client.ws.send(exact);
  await client.next('the reply to a 64 KiB message', (m) => m.req === 'big');

  step('pushes while a bench writes a run');
  const second = new WsClient(WebSocket, dashboard.wsUrl);
  await second.opened();
  await second.next('the list of runs', (m) => m.type === 'runs');
  runSqlite(db, insertRun({ id: 3, started_at: '2026-12-02T12:00:00Z', note: 'live' }));
  // The server polls four times a second; the bound is loose for a loaded test machine.
  const added = await client.next('run_added', (m) => m.type === 'run_added', 3000);
  check(added.run.id === 3 && added.run.status === 'running' && added.run.note === 'live', `run_added: ${JSON.stringify(added.run)}`);
  const live = cells(3).slice(0, 3);
  for (const row of live) {
    runSqlite(db, insertResult(row));
  }
  runSqlite(db, "UPDATE runs SET status = 'finished', finished_at = '2026-12-02T12:00:30Z' WHERE id = 3;");
  const updated = await client.next('run_updated', (m) => m.type === 'run_updated' && m.run.id === 3, 3000);
  check(updated.run.status === 'finished' && updated.run.results === 3, `run_updated: ${JSON.stringify(updated.run)}`);
  for (const c of [client, second]) {
    // The server writes to each client in turn: the second may still be receiving.
    await c.next('run_updated on each client', (m) => m.type === 'run_updated' && m.run.id === 3, 3000);
    const results = c.messages.filter((m) => m.type === 'result' && m.run_id === 3);
    check(results.length === 3, `each client gets 3 result pushes, got ${results.length}`);
    check(results.every((m, i) => m.result.layer === live[i].layer && m.result.records_per_msg === live[i].records_per_msg), 'results arrive in order');
    check(results[0].link && results[0].link.name === live[0].link && results[0].link.rtt_ms === 0, `a result carries its link: ${JSON.stringify(results[0].link)}`);
    const order = c.messages.filter((m) => m.run && m.run.id === 3).map((m) => m.type);
    check(order[0] === 'run_added' && order[order.length - 1] === 'run_updated', `order of pushes: ${order}`);
    check(c.messages.indexOf(results[2]) < c.messages.indexOf(c.messages.find((m) => m.type === 'run_updated')), 'the run finishes after its last result');
  }
  second.close();

  step('a foreign Origin is refused, the own one accepted');
  await expectRefusedUpgrade('foreign origin', dashboard.wsUrl, { origin: 'http://evil.example' });
  await expectRefusedUpgrade('other port', dashboard.wsUrl, { origin: `http://127.0.0.1:${port + 1}` });
  await expectRefusedUpgrade('DNS rebinding', dashboard.wsUrl, { origin: `http://evil.example:${port}`, headers: { Host: `evil.example:${port}` } });
  await expectRefusedUpgrade('another path', `ws://127.0.0.1:${port}/other`, {});
  const own = new WsClient(WebSocket, dashboard.wsUrl, { origin: `http://127.0.0.1:${port}` });
  await own.opened();
  await own.next('runs for the page\'s own origin', (m) => m.type === 'runs');
  own.close();
  check(/refused a websocket from origin http:\/\/evil\.example/.test(dashboard.stderr), 'the refusal is logged');

  step('a message over 64 KiB closes the connection (1009)');
  client.ws.send('x'.repeat(LIMIT + 1));
  await waitFor('the connection to close', () => client.closed, 5000);
  check(client.closed.code === 1009, `close code ${client.closed.code}, expected 1009`);
  const fragmented = new WsClient(WebSocket, dashboard.wsUrl);
  await fragmented.opened();
  const part = 'y'.repeat(30 * 1024);
  fragmented.ws.send(part, { fin: false });
  fragmented.ws.send(part, { fin: false });
  fragmented.ws.send(part, { fin: true });
  await waitFor('the fragmented message to close the connection', () => fragmented.closed, 5000);
  check(fragmented.closed.code === 1009, `fragmented: close code ${fragmented.closed.code}`);
  const after = new WsClient(WebSocket, dashboard.wsUrl);
  await after.opened();
  await after.next('the server still serves', (m) => m.type === 'runs');
  after.close();
  await dashboard.stopCleanly();

  step('compare over repeats, as `tern bench compare` says it');
  await compareRepeats(dir);

  step('a missing database, then a bench creates it');
  const missing = join(dir, 'later.db');
  const waiting = await startDashboard(missing);
  const watcher = new WsClient(WebSocket, waiting.wsUrl);
  await watcher.opened();
  const empty = await watcher.next('runs for a missing database', (m) => m.type === 'runs');
  check(empty.db.state === 'missing' && empty.runs.length === 0, `missing: ${JSON.stringify(empty.db)}`);
  check(!existsSync(missing), 'the dashboard never creates the database');
  const noRun = await watcher.request({ type: 'run', run_id: 1, req: 'r' });
  check(noRun.type === 'error', 'asking a missing database for a run is an error reply');
  createDatabase(missing);
  runSqlite(missing, finishedRun(1, 'first'));
  const ready = await watcher.next('runs once the database exists', (m) => m.type === 'runs' && m.db.state === 'ready' && m.runs.length === 1, 5000);
  check(ready.runs[0].note === 'first', 'the new run is listed');
  watcher.close();
  await waiting.stopCleanly();
});
