// browser_test.mjs: the dashboard page in headless Chromium.
//
//   node browser_test.mjs bench    over runs of a real `tern bench --quick`
//   node browser_test.mjs fixture  over runs written by fixture.mjs
//
// Both check that every link panel has a chart with points for both layers,
// that a run started while the page is open appears and fills in cell by
// cell without a reload, that a note made of HTML renders as text, and save
// a screenshot of the run view into the build folder. The fixture mode also
// checks runs of 3 repeats with a third layer (zmq): one point per cell with
// its spread, and the run's environment. The bench mode skips (exit 77)
// while the tern executable has no bench command.

import { execFile, spawn } from 'node:child_process';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { check, fail, launchChromium, main, openPage, OUT_DIR, runTern, sleep, SKIP, startDashboard, startProcess, step, tempDir, waitFor } from './harness.mjs';
import { cellCount, cells, createDatabase, ENVIRONMENT, finishedRun, insertResult, insertRun, LINKS, resultRow, runSqlite, XSS_NOTE } from './fixture.mjs';

const mode = process.argv[2];
if (mode !== 'bench' && mode !== 'fixture') {
  console.error('usage: node browser_test.mjs bench|fixture');
  process.exit(2);
}
const execFileAsync = promisify(execFile);

// What the page shows: per link panel, its chart's rendered points per layer.
function pageSummary() {
  const Chart = window.Chart;
  const selected = document.querySelector('#runs tr.selected');
  return {
    selected: selected ? Number(selected.dataset.runId) : null,
    badge: document.querySelector('.run-header .badge')?.textContent ?? null,
    runIds: [...document.querySelectorAll('#runs tr.run')].map((row) => Number(row.dataset.runId)),
    marker: window.testMarker ?? null,
    panels: [...document.querySelectorAll('.link-panel')].map((panel) => {
      const rate = Chart ? Chart.getChart(panel.querySelector('canvas.rate-chart')) : null;
      const share = Chart ? Chart.getChart(panel.querySelector('canvas.share-chart')) : null;
      const points = {};
      let spreads = 0;
      if (rate) {
        rate.data.datasets.forEach((dataset, i) => {
          points[dataset.layer] = (points[dataset.layer] || 0) + rate.getDatasetMeta(i).data.length;
          // A spread bar: several repeats whose range holds the median drawn.
          spreads += (dataset.spread || []).filter((s, j) => s && s.n > 1 && s.min < s.max && s.min <= dataset.data[j].y && dataset.data[j].y <= s.max).length;
        });
      }
      return {
        link: panel.dataset.link,
        rateChart: Boolean(rate),
        shareChart: Boolean(share),
        layers: points,
        tern: points.tern || 0,
        tcp: points.tcp || 0,
        spreads,
        spreadCells: [...panel.querySelectorAll('.values td')].filter((td) => /\(.+–.+\)/.test(td.textContent)).length,
        bars: share ? share.data.datasets.filter((d) => d.type === 'bar').reduce((n, d) => n + d.data.filter((v) => v !== null).length, 0) : 0,
        hundredLine: share ? share.data.datasets.some((d) => d.type === 'line' && d.borderDash?.length > 0 && d.data.every((v) => v === 100)) : false,
      };
    }),
  };
}

const totalPoints = (summary) => summary.panels.reduce((n, p) => n + Object.values(p.layers).reduce((a, b) => a + b, 0), 0);

// One panel per link with results; a chart with both layers on each link with stream results.
function checkPanels(summary, links, what, streamLinks = links) {
  const names = summary.panels.map((p) => p.link).sort();
  check(JSON.stringify(names) === JSON.stringify([...links].sort()), `${what}: one panel per link: expected ${links}, page has ${names}`);
  check(streamLinks.length > 0, `${what}: some link has stream results`);
  for (const panel of summary.panels.filter((p) => streamLinks.includes(p.link))) {
    check(panel.rateChart && panel.shareChart, `${what}: panel ${panel.link} has both charts`);
    check(panel.tern > 0 && panel.tcp > 0, `${what}: panel ${panel.link} has points for both layers (tern ${panel.tern}, tcp ${panel.tcp})`);
    check(panel.bars > 0, `${what}: panel ${panel.link} has share bars`);
  }
}

// Stream cells of a run that a chart can show: what the page should draw.
// (Repeats of a cell are one point; an open-loop cell is not charted.)
async function chartableCount(db, runId) {
  const failed = (await hasColumn(db, 'results', 'failed')) ? 'failed = 0' : '1';
  const closedLoop = (await hasColumn(db, 'results', 'rate')) ? 'IFNULL(rate, 0) = 0' : '1';
  const { stdout } = await execFileAsync('sqlite3', [
    db,
    `SELECT count(*) FROM (SELECT DISTINCT link, layer, mode, records_per_msg, payload_bytes, concurrency, batch_bytes FROM results` +
      ` WHERE run_id = ${runId} AND scenario = 'stream' AND lost = 0 AND records_per_msg > 0 AND records_per_s > 0 AND ${failed} AND ${closedLoop});`,
  ]);
  return Number(stdout.trim());
}

async function hasColumn(db, table, column) {
  const { stdout } = await execFileAsync('sqlite3', [db, `SELECT count(*) FROM pragma_table_info('${table}') WHERE name = '${column}';`]);
  return Number(stdout.trim()) > 0;
}

async function resultLinks(db, runId, onlyStream) {
  const where = onlyStream ? " AND scenario = 'stream'" : '';
  const { stdout } = await execFileAsync('sqlite3', [db, `SELECT DISTINCT link FROM results WHERE run_id = ${runId}${where} ORDER BY link;`]);
  return stdout.split('\n').filter(Boolean);
}

// A bench exits 0, or 1 when it stored a whole run in which some cell failed:
// the dashboard's job is then to show the failure, so that is no reason to stop.
async function checkBenchExit(db, runId, status, stderr) {
  if (status === 0) {
    return;
  }
  const { stdout } = await execFileAsync('sqlite3', [db, `SELECT status FROM runs WHERE id = ${runId};`]);
  check(status === 1 && stdout.trim() === 'failed', `tern bench --quick (run #${runId}) exited ${status}, run status "${stdout.trim()}": ${stderr.slice(-2000)}`);
  console.log(`note: run #${runId} has failed cells; the dashboard lists them in its panels`);
}

// The run list shows notes as text: the HTML note neither runs nor makes an element.
async function checkNoteIsText(page, runId) {
  await page.click(`#runs tr[data-run-id="${runId}"]`);
  await waitFor(`run #${runId} to load`, async () => (await page.evaluate(() => document.querySelector('.run-header h2')?.textContent ?? '')).includes(`#${runId}`));
  const found = await page.evaluate((note) => ({
    listed: [...document.querySelectorAll('#runs .run-note')].some((n) => n.textContent === note),
    header: document.querySelector('.run-header .run-note')?.textContent === note,
    images: document.querySelectorAll('img').length,
  }), XSS_NOTE);
  check(found.listed && found.header, `the note ${XSS_NOTE} renders literally in the list and the run header: ${JSON.stringify(found)}`);
  check(found.images === 0, 'the note made no <img> element');
}

// A run started with the page open: it appears, is followed, and fills in.
async function watchLiveRun(page, runId, isRunning, what) {
  await page.evaluate(() => {
    window.testMarker = 'no reload';
  });
  await waitFor(`${what}: run #${runId} to appear in the list`, async () => (await page.evaluate(pageSummary)).runIds.includes(runId), 60000);
  const seen = [];
  await waitFor(
    `${what}: run #${runId} to show points while running`,
    async () => {
      const s = await page.evaluate(pageSummary);
      seen.push({ points: totalPoints(s), badge: s.badge, selected: s.selected });
      return s.selected === runId && /^running/.test(s.badge ?? '') && totalPoints(s) > 0 && (await isRunning());
    },
    120000,
    100,
  );
  return seen;
}

// The trend chart's labels, band datasets, median line and table rows.
function trendSummary() {
  const chart = window.Chart.getChart(document.querySelector('canvas.trend-chart'));
  const datasets = chart ? chart.data.datasets : [];
  return {
    shown: document.querySelector('#view-trend').dataset.shown,
    labels: chart ? chart.data.labels : [],
    filler: Boolean(window.Chart.registry.plugins.get('filler')),
    bands: datasets.filter((d) => d.band).map((d) => ({ fill: d.fill, data: d.data })),
    median: datasets.find((d) => !d.band)?.data ?? [],
    rows: [...document.querySelectorAll('#view-trend tbody tr')].map((tr) => tr.textContent),
  };
}

async function showTrend(page, cell) {
  for (const [name, value] of Object.entries(cell)) {
    await page.selectOption(`#view-trend select[name="${name}"]`, value);
  }
  await page.click('#view-trend button[type="submit"]');
}

// Compares run a with run b in the Compare view; what the page shows then.
async function showComparison(page, a, b) {
  await page.selectOption('#view-compare select[name="a"]', String(a));
  await page.selectOption('#view-compare select[name="b"]', String(b));
  await page.click('#view-compare button[type="submit"]');
  await waitFor(`the comparison of #${a} and #${b}`, async () => (await page.locator('#view-compare .muted').first().textContent()).startsWith(`Run #${a} (A) against run #${b} (B)`));
  return page.evaluate(() => {
    const rows = [...document.querySelectorAll('#view-compare tbody tr')];
    // A cell is coloured when its background is not transparent.
    const coloured = rows.filter((tr) => [...tr.cells].some((td) => getComputedStyle(td).backgroundColor !== 'rgba(0, 0, 0, 0)'));
    const red = rows.find((tr) => tr.dataset.verdict === 'regression')?.querySelector('td.change');
    return {
      status: document.querySelector('#view-compare .muted').textContent,
      environment: document.querySelector('#view-compare .compare-env').textContent,
      rows: rows.length,
      coloured: coloured.length,
      regressions: rows.filter((tr) => tr.dataset.verdict === 'regression').length,
      titles: rows.map((tr) => tr.title),
      red: red ? { title: red.title, rowTitle: red.parentElement.title, color: getComputedStyle(red).color, background: getComputedStyle(red).backgroundColor } : {},
    };
  });
}

// The median of a cell's repeats (bench/stats.c's: the mean of the middle two of an even count).
function median(values) {
  const v = [...values].sort((a, b) => a - b);
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
}

// The ratio matrix of the run shown: every figure with its cell and ratio.
function ratioSummary() {
  return [...document.querySelectorAll('.ratio-matrix .ratio')].map((b) => ({
    scenario: b.closest('table').dataset.scenario,
    link: b.dataset.link,
    layer: b.dataset.layer,
    mode: b.dataset.mode,
    records: Number(b.dataset.records),
    keys: Number(b.dataset.keys),
    ratio: Number(b.dataset.ratio),
    text: b.textContent,
    background: getComputedStyle(b).backgroundColor,
    shares: [...document.querySelectorAll('.ratio-matrix tr')].filter((tr) => tr.querySelector('.link-share')).map((tr) => tr.dataset.link),
  }));
}

// A run over 1, 100 and 10,000 keys (tern bench --keys): the keys matrix
// holds tern/tcp at each number of keys, the one-key cell among them and
// alone in the stream matrix; a figure opens the trend of its number of keys.
async function checkKeys(page, db) {
  const loopback = LINKS[0];
  const rows = [insertRun({ id: 9, started_at: '2026-12-09T10:00:00Z', finished_at: '2026-12-09T10:01:00Z', status: 'finished', note: 'keys', links: [loopback] })];
  const expected = new Map();
  for (const keys of [1, 100, 10000]) {
    const tern = 2e6 / (1 + Math.log10(keys) * 0.1);
    const tcp = 2.2e6;
    expected.set(keys, tern / tcp);
    rows.push(insertResult({ ...resultRow(9, loopback, 'tern', 'batched', 16, 90 + keys), records_per_s: tern, keys }));
    rows.push(insertResult({ ...resultRow(9, loopback, 'tcp', 'batched', 16, 91 + keys), records_per_s: tcp, keys }));
  }
  runSqlite(db, ['BEGIN;', ...rows, 'COMMIT;'].join('\n'));
  await page.goto(`${page.url().replace(/#.*$/, '')}#run=9`);
  const shown = await waitFor('the keys matrix of run #9', async () => {
    const r = await page.evaluate(ratioSummary);
    return r.some((x) => x.scenario === 'keys') ? r : null;
  });
  const stream = shown.filter((x) => x.scenario === 'stream');
  check(stream.length === 1 && stream[0].keys === 1, `the stream matrix holds the one-key cell only: ${JSON.stringify(stream)}`);
  for (const [keys, ratio] of expected) {
    const f = shown.find((x) => x.scenario === 'keys' && x.keys === keys && x.layer === 'tern' && x.mode === 'batched');
    check(f && Math.abs(f.ratio - ratio) < 1e-9 * ratio, `tern/tcp over ${keys} keys: ${f && f.ratio}, expected ${ratio}`);
  }
  const headings = await page.evaluate(() => [...document.querySelectorAll('.ratio-matrix[data-scenario="keys"] thead th')].map((th) => th.textContent));
  check(headings.join('|') === 'link|1 key, 16 rec/msg|100 keys, 16 rec/msg|10000 keys, 16 rec/msg', `the keys matrix's columns: ${headings}`);
  await page.screenshot({ path: join(OUT_DIR, 'dashboard-keys-fixture.png'), clip: { x: 0, y: 0, width: 1400, height: 700 } });
  await page.click('.ratio-matrix[data-scenario="keys"] button.ratio[data-layer="tern"][data-keys="10000"]');
  await waitFor('the trend over 10000 keys', async () => {
    const v = await page.evaluate(viewSummary);
    return v.visible.join() === 'trend' && v.trend === 'loopback tern batched 16 10000' && v.hash === '#trend=loopback,tern,batched,16,10000';
  });
  const points = await waitFor('one point, the run over 10000 keys', async () => {
    const a = await page.evaluate(trendAxis);
    return a.figures.length === 1 ? a.figures : null;
  });
  check(points.length === 1, `the trend over 10000 keys has run #9 only: ${points}`);
}

// Which view shows, and what it shows.
function viewSummary() {
  const visible = ['run', 'trend', 'compare', 'live'].filter((v) => !document.getElementById(`view-${v}`).hidden);
  return {
    hash: location.hash,
    visible,
    tab: document.querySelector('.tabs button[aria-selected="true"]')?.dataset.view,
    run: document.querySelector('.run-header h2')?.textContent ?? '',
    selected: Number(document.querySelector('#runs tr.selected')?.dataset.runId ?? 0),
    trend: document.querySelector('#view-trend').dataset.shown ?? '',
    compare: document.querySelector('#view-compare .muted')?.textContent ?? '',
  };
}

// The y axis tick labels of the trend chart, and its datasets' labels.
function trendAxis() {
  const chart = window.Chart.getChart(document.querySelector('canvas.trend-chart'));
  return {
    ticks: chart.scales.y.ticks.map((t) => t.label),
    min: chart.scales.y.min,
    lines: chart.data.datasets.filter((d) => !d.band).map((d) => d.label),
    steps: [...document.querySelectorAll('#view-trend tbody tr')].map((tr) => tr.dataset.step),
    figures: [...document.querySelectorAll('#view-trend tbody tr')].map((tr) => tr.cells[5].textContent),
  };
}

// The ratio matrix of run #2 holds tern/tcp (and zmq/tcp) of the medians of
// the fixture's repeats, cell by cell; a figure opens its cell's trend.
async function checkRatioMatrix(page, run2) {
  const shown = await waitFor('the ratio matrix of run #2', async () => {
    const r = await page.evaluate(ratioSummary);
    return r.length > 0 ? r : null;
  });
  const expected = [];
  const key = (r) => `${r.link} ${r.mode} ${r.records_per_msg}`;
  const groups = new Map();
  for (const row of run2) {
    const k = `${key(row)} ${row.layer}`;
    groups.set(k, [...(groups.get(k) || []), row.records_per_s]);
  }
  for (const row of run2.filter((r) => r.layer !== 'tcp' && r.repeat === 0)) {
    const ratio = median(groups.get(`${key(row)} ${row.layer}`)) / median(groups.get(`${key(row)} tcp`));
    expected.push({ link: row.link, layer: row.layer, mode: row.mode, records: row.records_per_msg, ratio });
  }
  check(shown.length === expected.length, `a figure per tern and zmq cell: ${shown.length}, expected ${expected.length}`);
  for (const e of expected) {
    const f = shown.find((x) => x.scenario === 'stream' && x.link === e.link && x.layer === e.layer && x.mode === e.mode && x.records === e.records);
    check(f, `the matrix has ${e.layer} ${e.link} ${e.mode} ${e.records}`);
    check(Math.abs(f.ratio - e.ratio) < 1e-9 * e.ratio, `${e.layer}/tcp ${e.link} ${e.mode} ${e.records}: ${f.ratio}, expected ${e.ratio}`);
    check(f.text.endsWith(` ${e.ratio.toFixed(2)}`), `${e.layer} ${e.link} ${e.mode} ${e.records} reads ${e.ratio.toFixed(2)}: "${f.text}"`);
  }
  // One scale centred at 1.0: above is blue, below red.
  const above = shown.find((x) => x.ratio > 1.05);
  const below = shown.find((x) => x.ratio < 0.95);
  const rgb = (c) => c.match(/\d+/g).map(Number);
  check(above && rgb(above.background)[2] > rgb(above.background)[0], `a ratio above 1 is blue: ${JSON.stringify(above)}`);
  check(below && rgb(below.background)[0] > rgb(below.background)[2], `a ratio below 1 is red: ${JSON.stringify(below)}`);
  const limited = LINKS.filter((l) => l.bandwidth_Bps).map((l) => l.name).sort();
  check(JSON.stringify([...shown[0].shares].sort()) === JSON.stringify(limited), `the link share is beside the links with a bandwidth: ${shown[0].shares}`);
  await page.screenshot({ path: join(OUT_DIR, 'dashboard-ratio-fixture.png'), clip: { x: 0, y: 0, width: 1400, height: 700 } });

  step('a figure of the matrix opens its trend, and the URL names it');
  await page.click('.ratio-matrix tr[data-link="lan"] button.ratio[data-layer="tern"][data-mode="batched"][data-records="16"]');
  await waitFor('the trend of lan tern batched 16', async () => {
    const v = await page.evaluate(viewSummary);
    return v.visible.join() === 'trend' && v.trend === 'lan tern batched 16' && v.hash === '#trend=lan,tern,batched,16';
  });
}

// Each deep link opened cold, in a page of its own, shows its view.
async function checkDeepLinks(browser, url, problems) {
  const cases = [
    ['#run=1', (v) => v.visible.join() === 'run' && v.selected === 1 && v.run.startsWith('Run #1 ')],
    ['#trend=lan,tern,batched,1', (v) => v.visible.join() === 'trend' && v.tab === 'trend' && v.trend === 'lan tern batched 1'],
    ['#compare=2,4', (v) => v.visible.join() === 'compare' && v.compare.startsWith('Run #2 (A) against run #4 (B)')],
    ['#live', (v) => v.visible.join() === 'live'],
  ];
  for (const [hash, ok] of cases) {
    const page = await openPage(browser, `${url}${hash}`, problems);
    await waitFor(`${hash} opened cold to show its view`, async () => ok(await page.evaluate(viewSummary)));
    if (hash === '#run=1') {
      const v = await page.evaluate(() => document.getElementById('follow').checked);
      check(v === false, 'a URL naming an older run does not follow new runs');
    }
    await page.close();
  }
}

// Navigating pushes history entries; back and forward show each view again.
async function checkBackForward(browser, url, problems) {
  const page = await openPage(browser, `${url}#run=2`, problems);
  const at = (what, pred) => waitFor(what, async () => pred(await page.evaluate(viewSummary)));
  await at('run #2', (v) => v.selected === 2 && v.run.startsWith('Run #2 '));
  await page.click('#runs tr[data-run-id="1"]');
  await at('run #1 in the URL', (v) => v.hash === '#run=1' && v.run.startsWith('Run #1 '));
  // The tab shows the cell its pickers hold (a history entry of its own), then the one picked.
  await page.click('nav button[data-view="trend"]');
  const first = await at('the first trend in the URL', (v) => (v.hash.startsWith('#trend=') && v.trend ? v : null));
  check(first.hash !== '#trend=wifi,tcp,lowlat,4', `the pickers start elsewhere: ${first.hash}`);
  await showTrend(page, { link: 'wifi', layer: 'tcp', mode: 'lowlat', records_per_msg: '4' });
  await at('the trend in the URL', (v) => v.hash === '#trend=wifi,tcp,lowlat,4' && v.trend === 'wifi tcp lowlat 4');
  await page.click('nav button[data-view="compare"]');
  await page.selectOption('#view-compare select[name="a"]', '1');
  await page.selectOption('#view-compare select[name="b"]', '2');
  await page.click('#view-compare button[type="submit"]');
  await at('the comparison in the URL', (v) => v.hash === '#compare=1,2' && v.compare.startsWith('Run #1 (A) against run #2 (B)'));
  await page.goBack();
  await at('back: the trend', (v) => v.visible.join() === 'trend' && v.hash === '#trend=wifi,tcp,lowlat,4');
  await page.goBack();
  await at('back: the first trend', (v) => v.visible.join() === 'trend' && v.hash === first.hash && v.trend === first.trend);
  await page.goBack();
  await at('back: run #1', (v) => v.visible.join() === 'run' && v.hash === '#run=1' && v.selected === 1);
  await page.goBack();
  await at('back: run #2', (v) => v.visible.join() === 'run' && v.hash === '#run=2' && v.selected === 2 && v.run.startsWith('Run #2 '));
  await page.goForward();
  await at('forward: run #1', (v) => v.visible.join() === 'run' && v.selected === 1);
  await page.goForward();
  await page.goForward();
  await at('forward: the trend', (v) => v.visible.join() === 'trend' && v.trend === 'wifi tcp lowlat 4');
  await page.goForward();
  await at('forward: the comparison', (v) => v.visible.join() === 'compare' && v.hash === '#compare=1,2');
  await page.close();
}

// Two runs whose cell differs by 0.1 %, on two hosts: the trend's axis labels
// all differ, from zero and zoomed; the step is within the spread; one line per host.
async function checkSteadyTrend(page, db) {
  const steady = { name: 'steady', bandwidth_Bps: null, rtt_ms: 0 };
  const rows = [];
  [[6, 'bench-host', 1.836e6], [7, 'lab-b', 1.8378e6]].forEach(([id, host, rate]) => {
    rows.push(insertRun({ id, started_at: `2026-12-0${id}T10:00:00Z`, finished_at: `2026-12-0${id}T10:01:00Z`, status: 'finished', note: `steady on ${host}`, host, links: [steady] }));
    [0.9995, 1, 1.0005].forEach((f, repeat) => rows.push(insertResult({ ...resultRow(id, steady, 'tern', 'batched', 64, id), records_per_s: rate * f, repeat })));
  });
  runSqlite(db, ['BEGIN;', ...rows, 'COMMIT;'].join('\n'));
  await page.goto(`${page.url().replace(/#.*$/, '')}#trend=steady,tern,batched,64`);
  const distinct = (ticks) => ticks.length >= 3 && ticks.every((t) => t !== '') && new Set(ticks).size === ticks.length;
  const fromZero = await waitFor('the steady trend', async () => {
    const v = await page.evaluate(viewSummary);
    const a = v.trend === 'steady tern batched 64' ? await page.evaluate(trendAxis) : null;
    return a && a.steps.length === 2 ? a : null;
  });
  check(fromZero.min === 0 && distinct(fromZero.ticks), `a rate's axis starts at 0 with distinct labels: ${JSON.stringify(fromZero)}`);
  const figures = fromZero.figures.flatMap((f) => f.split(/[ ()–]+/).filter((x) => /\d/.test(x)));
  check(figures.length === 6 && new Set(figures).size === 6, `the table writes the six figures differently: ${fromZero.figures}`);
  check(fromZero.steps[1] === 'within', `a change of 0.1% inside the repeats' spread is within the spread: ${fromZero.steps}`);
  await page.check('#view-trend input[name="zoom"]');
  const zoomed = await page.evaluate(trendAxis);
  check(zoomed.min > 1.8e6 && distinct(zoomed.ticks), `zoomed to the data, every label distinct: ${JSON.stringify(zoomed.ticks)}`);
  await page.screenshot({ path: join(OUT_DIR, 'dashboard-trend-steady.png'), fullPage: true });
  await page.check('#view-trend input[name="per_host"]');
  const perHost = await page.evaluate(trendAxis);
  check(JSON.stringify(perHost.lines) === JSON.stringify(['bench-host', 'lab-b']), `one line per host: ${perHost.lines}`);
  await page.uncheck('#view-trend input[name="zoom"]');
  await page.uncheck('#view-trend input[name="per_host"]');

  step('the runs list filters by host and by note');
  await page.selectOption('#runs select[name="host"]', 'lab-b');
  await waitFor('only the run of lab-b', async () => (await page.evaluate(pageSummary)).runIds.join() === '7');
  await page.selectOption('#runs select[name="host"]', '');
  await page.fill('#runs input[name="note"]', 'STEADY');
  await waitFor('only the steady runs', async () => (await page.evaluate(pageSummary)).runIds.join() === '7,6');
  await page.fill('#runs input[name="note"]', '');
  await waitFor('every run again', async () => (await page.evaluate(pageSummary)).runIds.length === 7);
}

// A run whose bench was killed (SIGKILL: it never ends its run) shows
// "interrupted" once its process is gone, with no change to the database.
async function checkInterrupted(page, db) {
  const bench = spawn('sleep', ['600'], { stdio: 'ignore' });
  const exited = new Promise((resolve) => bench.on('exit', resolve));
  try {
    await waitFor('the stand-in bench to start', async () => bench.pid > 0);
    runSqlite(db, insertRun({ id: 8, started_at: '2026-12-08T10:00:00Z', note: 'killed bench', host: hostname(), pid: bench.pid, links: [LINKS[1]] }));
    const badge = () => page.evaluate(() => document.querySelector('#runs tr[data-run-id="8"] .badge')?.textContent ?? null);
    await waitFor('run #8 listed as running', async () => (await badge()) === 'running');
  } finally {
    bench.kill('SIGKILL');
  }
  await exited;
  const status = await waitFor('run #8 listed as interrupted', async () => {
    const b = await page.evaluate(() => document.querySelector('#runs tr[data-run-id="8"] .badge')?.textContent ?? null);
    return b === 'interrupted' ? b : null;
  });
  check(status === 'interrupted', 'the killed run is interrupted');
  const { stdout } = await execFileAsync('sqlite3', [db, 'SELECT status FROM runs WHERE id = 8;']);
  check(stdout.trim() === 'running', `the dashboard wrote nothing: the database still says ${stdout.trim()}`);
  await page.click('#runs tr[data-run-id="8"]');
  await waitFor('run #8 shown interrupted', async () => (await page.evaluate(pageSummary)).badge === 'interrupted');
  await page.screenshot({ path: join(OUT_DIR, 'dashboard-interrupted.png') });
}

// The fixture's first two runs: 3 repeats a cell, and a third layer.
const REPEATED = { repeats: 3, layers: ['tern', 'tcp', 'zmq'] };

async function fixtureMode(browser, problems) {
  const dir = tempDir();
  const db = join(dir, 'bench.db');
  createDatabase(db);
  runSqlite(db, finishedRun(1, XSS_NOTE, 1, REPEATED));
  runSqlite(db, finishedRun(2, 'fixture run 2', 1, REPEATED));
  const dashboard = await startDashboard(db);
  const page = await openPage(browser, dashboard.url, problems);

  step('the newest run: a panel per link, a point per cell for each of three layers');
  const run2 = cells(2, 1, LINKS, REPEATED);
  await waitFor('run #2 panels', async () => {
    const s = await page.evaluate(pageSummary);
    return s.selected === 2 && s.panels.length === LINKS.length && totalPoints(s) === cellCount(run2);
  });
  const summary = await page.evaluate(pageSummary);
  checkPanels(summary, LINKS.map((l) => l.name), 'run #2');
  for (const panel of summary.panels) {
    const limited = LINKS.find((l) => l.name === panel.link).bandwidth_Bps !== null;
    check(panel.hundredLine === limited, `panel ${panel.link}: the dotted 100% line is drawn exactly when the link has a bandwidth`);
    check(panel.layers.zmq === cellCount(run2.filter((r) => r.link === panel.link && r.layer === 'zmq')), `panel ${panel.link}: a point per zmq cell beside tern and tcp: ${JSON.stringify(panel.layers)}`);
  }
  // On loopback no cell hits a bandwidth cap, so each of its 3 repeats differs.
  const loopback = summary.panels.find((p) => p.link === 'loopback');
  const loopbackCells = cellCount(run2.filter((r) => r.link === 'loopback'));
  check(loopback.spreads === loopbackCells, `loopback: a spread bar for each of its ${loopbackCells} cells, got ${loopback.spreads}`);
  check(loopback.spreadCells === loopbackCells, `loopback: the values table shows "median (min–max)" for each cell, got ${loopback.spreadCells}`);

  // The page's median is bench/stats.c's: the mean of the middle two of an even count.
  const medians = await page.evaluate(async () => {
    const { summarize } = await import('/cells.js');
    return [summarize([4, 1, 10, 2]), summarize([3, 1, 2]), summarize([])];
  });
  check(JSON.stringify(medians) === JSON.stringify([{ n: 4, median: 3, min: 1, max: 10 }, { n: 3, median: 2, min: 1, max: 3 }, null]), `medians: ${JSON.stringify(medians)}`);

  step('the tern/tcp matrix of run #2');
  await checkRatioMatrix(page, run2);
  await page.click('nav button[data-view="run"]');
  await waitFor('back on the run view', async () => (await page.evaluate(viewSummary)).visible.join() === 'run');

  step("the run's environment in its header");
  const header = await page.evaluate(() => ({
    kernel: document.querySelector('.run-header dd.kernel')?.textContent,
    build: document.querySelector('.run-header dd.build')?.textContent,
    commit: document.querySelector('.run-header dd.commit')?.textContent,
    env: document.querySelector('.run-header details.env')?.textContent ?? '',
  }));
  check(header.kernel === ENVIRONMENT.kernel && header.build === `${ENVIRONMENT.build_type}, ${ENVIRONMENT.compiler}` && header.commit.includes(ENVIRONMENT.tern_commit), `the header names kernel, build and commit: ${JSON.stringify(header)}`);
  check(header.env.includes('governor') && header.env.includes('performance'), `the header lists the env members: ${header.env}`);

  step('the note renders as text');
  await checkNoteIsText(page, 1);

  step('screenshot of the run view');
  await page.click('#runs tr[data-run-id="2"]');
  await waitFor('run #2 again', async () => (await page.evaluate(pageSummary)).panels.length === LINKS.length);
  await page.screenshot({ path: join(OUT_DIR, 'dashboard-run-fixture.png'), fullPage: true });

  step('a run written while the page is open fills in live');
  const liveLinks = LINKS.filter((l) => ['lan', 'wifi'].includes(l.name));
  const liveCells = cells(3, 1, liveLinks);
  let writing = true;
  const writer = (async () => {
    await execFileAsync('sqlite3', [db, insertRun({ id: 3, started_at: '2026-12-02T12:00:00Z', note: 'live', links: liveLinks })]);
    for (const row of liveCells) {
      await sleep(40);
      await execFileAsync('sqlite3', [db, insertResult(row)]);
    }
    await execFileAsync('sqlite3', [db, "UPDATE runs SET status = 'finished', finished_at = '2026-12-02T12:00:30Z' WHERE id = 3;"]);
    writing = false;
  })();
  // The follow box is unticked by clicking an older run: tick it again.
  await page.check('#follow');
  const seen = await watchLiveRun(page, 3, async () => writing, 'fixture');
  await writer;
  await waitFor('the live run to finish with every point', async () => {
    const s = await page.evaluate(pageSummary);
    return s.badge === 'finished' && totalPoints(s) === liveCells.length;
  });
  const done = await page.evaluate(pageSummary);
  checkPanels(done, liveLinks.map((l) => l.name), 'live run #3');
  check(done.marker === 'no reload', 'the page was not reloaded');
  check(seen.some((s) => s.points > 0 && s.points < liveCells.length), `the panels filled in cell by cell: ${JSON.stringify(seen.slice(-3))}`);

  step('the trend of a repeated cell: a point per run and a band');
  // Run #2 has the zmq layer: its cells fill the trend's pickers.
  await page.click('#runs tr[data-run-id="2"]');
  await waitFor('run #2 again', async () => (await page.evaluate(pageSummary)).panels.length === LINKS.length);
  await page.click('nav button[data-view="trend"]');
  // lan at 1 record a message is below the link's cap, so the repeats differ; the live run #3 has it too.
  await showTrend(page, { link: 'lan', layer: 'tern', mode: 'batched', records_per_msg: '1' });
  const trend = await waitFor('the trend of lan tern batched 1', async () => {
    const t = await page.evaluate(trendSummary);
    return t.shown === 'lan tern batched 1' ? t : null;
  });
  check(JSON.stringify(trend.labels) === JSON.stringify(['#1', '#2', '#3']) && trend.rows.length === 3, `a point and a table row per run, not per repeat: ${JSON.stringify(trend.labels)}, ${trend.rows.length} rows`);
  check(trend.filler && trend.bands.length === 2 && trend.bands[0].fill === false && trend.bands[1].fill === '-1', `a band filled between the min and max datasets: ${JSON.stringify(trend.bands)}`);
  const [low, high] = trend.bands.map((b) => b.data);
  check([0, 1].every((i) => low[i] < trend.median[i] && trend.median[i] < high[i]), `runs #1 and #2 (3 repeats): min < median < max: ${JSON.stringify({ low, median: trend.median, high })}`);
  check(low[2] === trend.median[2] && high[2] === trend.median[2], 'run #3 (one sample): the band closes on its point');
  check(/\(.+–.+\)/.test(trend.rows[0]) && trend.rows[0].includes('3'), `the table row of run #1 shows median (min–max) and 3 repeats: ${trend.rows[0]}`);
  await page.screenshot({ path: join(OUT_DIR, 'dashboard-trend-fixture.png'), fullPage: true });
  await showTrend(page, { link: 'lan', layer: 'zmq', mode: 'lowlat', records_per_msg: '64' });
  await waitFor('the zmq trend', async () => {
    const t = await page.evaluate(trendSummary);
    return t.shown === 'lan zmq lowlat 64' && t.labels.join() === '#1,#2' && t.rows.length === 2;
  });

  step('compare: identical samples give no verdict, half as fast gives red cells');
  // Run #4 has run #2's samples; run #5 is half as fast on another kernel.
  runSqlite(db, finishedRun(4, 'run 2 again', 1, { ...REPEATED, seed: 2 }));
  runSqlite(db, finishedRun(5, 'half as fast', 0.5, { ...REPEATED, seed: 2, environment: { kernel: 'Linux 6.19.0 x86_64' } }));
  await waitFor('runs #4 and #5 in the list', async () => (await page.evaluate(pageSummary)).runIds.includes(5));
  await page.click('nav button[data-view="compare"]');
  const count = cellCount(cells(2, 1, LINKS, REPEATED));
  const same = await showComparison(page, 2, 4);
  check(same.rows === count, `a row per cell: ${same.rows} rows, ${count} cells`);
  check(same.coloured === 0, `identical samples: no coloured cell, got ${same.coloured}`);
  check(/\b0 regressions\b/.test(same.status) && /\b0 improvements\b/.test(same.status), `the summary says 0 regressions and 0 improvements: ${same.status}`);
  check(same.environment === 'same environment', `the environments are the same: ${same.environment}`);
  check(same.titles.every((t) => /^same: p = [\d.e-]+, n = 3\/3$/.test(t)), `each cell's title has its p-value and n = 3/3: ${same.titles[0]}`);
  const half = await showComparison(page, 2, 5);
  check(half.regressions === count && half.coloured === count, `half as fast: every cell a red regression: ${half.regressions} of ${count}`);
  check(half.red.color === 'rgb(192, 57, 43)' && half.red.background !== 'rgba(0, 0, 0, 0)', `a regression is red: ${JSON.stringify(half.red)}`);
  const p = /^regression: p = ([\d.e-]+), n = 3\/3$/.exec(half.red.title);
  check(p && Number(p[1]) < 0.01 && half.red.title === half.red.rowTitle, `the red cell's title gives its p-value (< 0.01) and n: ${half.red.title}`);
  check(new RegExp(`\\b${count} regressions\\b`).test(half.status), `the summary counts the regressions: ${half.status}`);
  check(half.environment.includes('kernel') && half.environment.includes('Linux 6.19.0 x86_64'), `the kernel difference is shown: ${half.environment}`);
  // The pushes of runs #4 and #5 came before this reply: the counts are final.
  const listed = await page.evaluate(() => document.querySelector('#runs tr[data-run-id="5"]').textContent);
  check(listed.includes(`${cells(5, 1, LINKS, REPEATED).length} results`), `a run written at once is counted once: ${listed}`);
  await page.screenshot({ path: join(OUT_DIR, 'dashboard-compare-fixture.png') });

  step('deep links opened cold: #run=1, #trend=..., #compare=2,4, #live');
  await checkDeepLinks(browser, dashboard.url, problems);
  step('back and forward move between views');
  await checkBackForward(browser, dashboard.url, problems);
  step('a trend of two runs 0.1% apart, on two hosts');
  await checkSteadyTrend(page, db);
  step('a run whose bench was killed is interrupted');
  await checkInterrupted(page, db);
  step('a run over many keys: the keys matrix, and a trend per number of keys');
  await checkKeys(page, db);
  await page.close();
  await dashboard.stopCleanly();

  step('a missing database: the page says so and how to make one');
  const missing = join(dir, 'missing.db');
  const empty = await startDashboard(missing);
  const page2 = await openPage(browser, empty.url, problems);
  await waitFor('the notice', async () => (await page2.locator('#notice').isVisible()) && (await page2.locator('#notice').textContent()).includes('tern bench --quick --db'));
  await page2.screenshot({ path: join(OUT_DIR, 'dashboard-missing-db.png') });
  createDatabase(missing);
  runSqlite(missing, finishedRun(1, 'first'));
  await waitFor('the first run once the database exists', async () => (await page2.evaluate(pageSummary)).panels.length === LINKS.length);
  check(!(await page2.locator('#notice').isVisible()), 'the notice goes away once there is a run');
  await page2.close();
  await empty.stopCleanly();
}

async function benchMode(browser, problems) {
  const dir = tempDir();
  const db = join(dir, 'bench.db');

  step('a first `tern bench --quick`');
  const first = runTern(['bench', '--quick', '--db', db, '--note', XSS_NOTE], 240000);
  await checkBenchExit(db, 1, first.status, first.stderr);
  const dashboard = await startDashboard(db);
  const page = await openPage(browser, dashboard.url, problems);

  step('every link panel has a chart with points for both layers');
  const links1 = await resultLinks(db, 1, false);
  const stream1 = await resultLinks(db, 1, true);
  check(stream1.length > 0, 'the quick bench measured some links');
  const expected1 = await chartableCount(db, 1);
  await waitFor('run #1 panels', async () => {
    const s = await page.evaluate(pageSummary);
    return s.selected === 1 && s.panels.length === links1.length && totalPoints(s) === expected1;
  }, 20000);
  checkPanels(await page.evaluate(pageSummary), links1, 'run #1', stream1);
  await page.screenshot({ path: join(OUT_DIR, 'dashboard-run.png'), fullPage: true });

  // One link is enough to watch cells arrive one by one, at a quarter of the time.
  step('a second bench appears and fills in live');
  const second = startProcess(['bench', '--quick', '--links', 'lan', '--db', db, '--note', 'second run']);
  const seen = await watchLiveRun(page, 2, async () => second.exited === null, 'bench');
  const exit = await Promise.race([second.exit, sleep(240000).then(() => null)]);
  check(exit !== null, 'the second bench finished within 4 minutes');
  await checkBenchExit(db, 2, exit.code, second.stderr);
  const links2 = await resultLinks(db, 2, false);
  const stream2 = await resultLinks(db, 2, true);
  const expected2 = await chartableCount(db, 2);
  await waitFor('run #2 to finish with every point', async () => {
    const s = await page.evaluate(pageSummary);
    return s.selected === 2 && !/^running/.test(s.badge ?? '') && totalPoints(s) === expected2;
  }, 20000);
  const done = await page.evaluate(pageSummary);
  checkPanels(done, links2, 'run #2', stream2);
  check(done.marker === 'no reload', 'the page was not reloaded');
  check(seen.some((s) => s.points > 0 && s.points < expected2), `the panels filled in cell by cell: ${JSON.stringify(seen.slice(-3))}`);

  step('the note renders as text');
  await checkNoteIsText(page, 1);
  await page.click('#runs tr[data-run-id="2"]');
  await page.close();
  await dashboard.stopCleanly();
}

await main(`dashboard_browser (${mode})`, async () => {
  if (mode === 'bench') {
    const help = runTern(['bench', '--help']);
    if (help.status !== 0) {
      console.log('SKIP: `tern bench --help` fails: the tern executable has no bench yet');
      process.exit(SKIP);
    }
  }
  const browser = await launchChromium();
  const problems = [];
  try {
    await (mode === 'bench' ? benchMode(browser, problems) : fixtureMode(browser, problems));
  } finally {
    await browser.close();
  }
  check(problems.length === 0, `the page reported problems:\n${problems.join('\n')}`);
});
