// browser_test.mjs: the dashboard page in headless Chromium.
//
//   node browser_test.mjs bench    over runs of a real `tern bench --quick`
//   node browser_test.mjs fixture  over runs written by fixture.mjs
//
// Both check that every link panel has a chart with points for both layers,
// that a run started while the page is open appears and fills in cell by
// cell without a reload, that a note made of HTML renders as text, and save
// a screenshot of the run view into the build folder. The bench mode skips
// (exit 77) while the tern executable has no bench command.

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { check, main, OUT_DIR, runTern, sleep, SKIP, startDashboard, startProcess, step, tempDir, waitFor, webModule } from './harness.mjs';
import { cells, createDatabase, finishedRun, insertResult, insertRun, LINKS, runSqlite, XSS_NOTE } from './fixture.mjs';

const mode = process.argv[2];
if (mode !== 'bench' && mode !== 'fixture') {
  console.error('usage: node browser_test.mjs bench|fixture');
  process.exit(2);
}
const execFileAsync = promisify(execFile);
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

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
      if (rate) {
        rate.data.datasets.forEach((dataset, i) => {
          points[dataset.layer] = (points[dataset.layer] || 0) + rate.getDatasetMeta(i).data.length;
        });
      }
      return {
        link: panel.dataset.link,
        rateChart: Boolean(rate),
        shareChart: Boolean(share),
        tern: points.tern || 0,
        tcp: points.tcp || 0,
        all: Object.values(points).reduce((n, v) => n + v, 0),
        bars: share ? share.data.datasets.filter((d) => d.type === 'bar').reduce((n, d) => n + d.data.filter((v) => v !== null).length, 0) : 0,
        hundredLine: share ? share.data.datasets.some((d) => d.type === 'line' && d.borderDash?.length > 0 && d.data.every((v) => v === 100)) : false,
      };
    }),
  };
}

// Every layer's points (zmq's too, when the bench was built with it).
const totalPoints = (summary) => summary.panels.reduce((n, p) => n + p.all, 0);

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
async function chartableCount(db, runId) {
  const { stdout } = await execFileAsync('sqlite3', [
    db,
    `SELECT count(*) FROM results WHERE run_id = ${runId} AND scenario = 'stream' AND lost = 0 AND records_per_msg > 0 AND records_per_s > 0` +
      ` AND ${(await hasColumn(db, 'results', 'failed')) ? 'failed = 0' : '1'};`,
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

async function openPage(browser, url, problems) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.on('dialog', (dialog) => {
    problems.push(`a dialog opened: ${dialog.message()}`);
    dialog.dismiss().catch(() => {});
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error') {
      problems.push(`console error: ${msg.text()}`);
    }
  });
  page.on('requestfailed', (req) => problems.push(`request failed: ${req.url()}`));
  page.on('request', (req) => {
    if (!req.url().startsWith(url) && !req.url().startsWith('ws://127.0.0.1') && !req.url().startsWith('data:')) {
      problems.push(`the page asked for something outside the dashboard: ${req.url()}`);
    }
  });
  await page.goto(url);
  return page;
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

async function fixtureMode(browser, problems) {
  const dir = tempDir();
  const db = join(dir, 'bench.db');
  createDatabase(db);
  runSqlite(db, finishedRun(1, XSS_NOTE));
  runSqlite(db, finishedRun(2, 'fixture run 2'));
  const dashboard = await startDashboard(db);
  const page = await openPage(browser, dashboard.url, problems);

  step('the newest run: a panel per link, points for both layers');
  await waitFor('run #2 panels', async () => {
    const s = await page.evaluate(pageSummary);
    return s.selected === 2 && s.panels.length === LINKS.length && totalPoints(s) === cells(2).length;
  });
  const summary = await page.evaluate(pageSummary);
  checkPanels(summary, LINKS.map((l) => l.name), 'run #2');
  for (const panel of summary.panels) {
    const limited = LINKS.find((l) => l.name === panel.link).bandwidth_Bps !== null;
    check(panel.hundredLine === limited, `panel ${panel.link}: the dotted 100% line is drawn exactly when the link has a bandwidth`);
  }

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

  step('trend and compare views');
  await page.click('nav button[data-view="trend"]');
  await page.selectOption('#view-trend select[name="link"]', 'lan');
  await page.selectOption('#view-trend select[name="layer"]', 'tern');
  await page.selectOption('#view-trend select[name="mode"]', 'batched');
  await page.selectOption('#view-trend select[name="records_per_msg"]', '16');
  await page.click('#view-trend button[type="submit"]');
  await waitFor('the trend table', async () => (await page.locator('#view-trend tbody tr').count()) === 3);
  check(await page.evaluate(() => Boolean(window.Chart.getChart(document.querySelector('canvas.trend-chart')))), 'the trend has a chart');
  await page.click('nav button[data-view="compare"]');
  await page.selectOption('#view-compare select[name="a"]', '1');
  await page.selectOption('#view-compare select[name="b"]', '2');
  await page.click('#view-compare button[type="submit"]');
  await waitFor('the comparison', async () => (await page.locator('#view-compare tbody tr').count()) === cells(1).length);
  const change = await page.locator('#view-compare tbody tr td.change').first().textContent();
  check(/^[+-]\d+\.\d%$/.test(change), `a change in percent: ${change}`);
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

  step('a second bench appears and fills in live');
  const second = startProcess(['bench', '--quick', '--db', db, '--note', 'second run']);
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
  check(existsSync(CHROMIUM), `${CHROMIUM} not found: install chromium (scripts/setup --test does)`);
  const { chromium } = await webModule('playwright-core', 'index.mjs');
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const problems = [];
  try {
    await (mode === 'bench' ? benchMode(browser, problems) : fixtureMode(browser, problems));
  } finally {
    await browser.close();
  }
  check(problems.length === 0, `the page reported problems:\n${problems.join('\n')}`);
});
