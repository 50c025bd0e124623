// browser_live_test.mjs: the Live view in headless Chromium against a
// running network of real tern processes (network.mjs): the graph has a
// circle for each of the three nodes (the router marked as one) and lines
// between them, the rate chart of demo/a gains points between two looks,
// the latency chart has p50/p99/p99.9, the table lists the key at both
// ends. Saves dashboard-live.png in the build folder. Then a dashboard
// without --connect, whose Live view says how to turn it on.

import { join } from 'node:path';
import { check, launchChromium, main, openPage, OUT_DIR, startDashboard, step, tempDir, waitFor } from './harness.mjs';
import { explained, NODES, startLiveDashboard, startNetwork } from './network.mjs';

// What the Live view shows.
function liveSummary() {
  const Chart = window.Chart;
  const view = document.querySelector('#view-live');
  const chart = (selector) => (Chart ? Chart.getChart(view.querySelector(selector)) : null);
  const rate = chart('canvas.live-rate-chart');
  const latency = chart('canvas.live-latency-chart');
  return {
    hidden: view.hidden,
    off: !view.querySelector('.live-off').hidden,
    offText: view.querySelector('.live-off').textContent,
    status: view.querySelector('.live-status').textContent,
    key: view.dataset.key,
    nodes: [...view.querySelectorAll('.live-node')].map((g) => ({ node: g.dataset.node, kind: g.dataset.kind, circles: g.querySelectorAll('circle').length })),
    links: [...view.querySelectorAll('.live-link')].map((g) => ({ a: g.dataset.a, b: g.dataset.b, label: g.querySelector('text').textContent })),
    rate: rate ? rate.data.datasets.map((d) => ({ label: d.label, node: d.node, role: d.role, points: d.data.length, last: d.data.length ? d.data[d.data.length - 1].y : null })) : null,
    rateAxes: rate ? [rate.options.scales.x.title.text, rate.options.scales.y.title.text] : null,
    latency: latency ? latency.data.datasets.map((d) => ({ label: d.label, points: d.data.length })) : null,
    latencyAxes: latency ? [latency.options.scales.x.title.text, latency.options.scales.y.title.text] : null,
    rows: [...view.querySelectorAll('table.live-keys tbody tr')].map((tr) => ({ ...tr.dataset })),
  };
}

const ratePoints = (summary) => (summary.rate || []).reduce((n, d) => n + d.points, 0);

async function watch(browser, problems, network) {
  const dashboard = await startLiveDashboard(join(tempDir(), 'none.db'), network);
  const page = await openPage(browser, dashboard.url, problems);
  step('the Live tab');
  await page.click('.tabs button[data-view="live"]');

  step('the graph: a circle for each node, the router marked, lines between them');
  const first = await explained(network, dashboard, () =>
    waitFor(
      'the three nodes in the graph and demo/a in the rate chart',
      async () => {
        const s = await page.evaluate(liveSummary);
        const drawn = new Set(s.nodes.filter((n) => n.circles === 1).map((n) => n.node));
        const pub = (s.rate || []).find((d) => d.node === 'live-P' && d.role === 'pub');
        return NODES.every((n) => drawn.has(n)) && pub && pub.points >= 1 && pub.last > 0 ? s : null;
      },
      45000,
      250,
    ),
  );
  check(!first.hidden && !first.off, 'the Live view is shown, not its notice');
  check(first.nodes.find((n) => n.node === 'live-R').kind === 'router', `live-R is drawn as a router: ${JSON.stringify(first.nodes)}`);
  check(first.nodes.find((n) => n.node === 'live-P').kind === 'peer', 'live-P is drawn as a peer');
  check(first.nodes.some((n) => n.node === dashboard.observer && n.kind === 'observer'), `the dashboard itself is drawn as the observer: ${JSON.stringify(first.nodes)}`);
  for (const peer of ['live-P', 'live-S']) {
    const [a, b] = ['live-R', peer].sort();
    check(first.links.some((l) => l.a === a && l.b === b && l.label.startsWith('rtt')), `a line between live-R and ${peer}, labelled with its rtt: ${JSON.stringify(first.links)}`);
  }
  check(first.key === 'demo/a', `the charts show demo/a: ${first.key}`);
  check(first.status.includes(network.endpoint), `the status names the endpoint: ${first.status}`);
  check(first.rateAxes[1] === 'messages/s' && first.rateAxes[0].includes('time'), `the rate chart's axes: ${first.rateAxes}`);
  check(first.latencyAxes[1].startsWith('latency (µs'), `the latency chart's axes: ${first.latencyAxes}`);

  step('the rate chart grows between two looks');
  const before = ratePoints(first);
  const later = await waitFor(
    'more points in the rate chart',
    async () => {
      const s = await page.evaluate(liveSummary);
      return ratePoints(s) > before ? s : null;
    },
    30000,
    250,
  );
  check(later.rate.some((d) => d.node === 'live-S' && d.role === 'sub' && d.points >= 1), `the subscriber's rate is drawn: ${JSON.stringify(later.rate)}`);

  step('the latency chart and the table');
  const full = await waitFor(
    'latency points for live-S',
    async () => {
      const s = await page.evaluate(liveSummary);
      const labels = (s.latency || []).filter((d) => d.points > 0).map((d) => d.label);
      return ['p50', 'p99', 'p99.9'].every((p) => labels.includes(`live-S sub ${p}`)) ? s : null;
    },
    30000,
    250,
  );
  for (const [node, role] of [['live-P', 'pub'], ['live-S', 'sub']]) {
    check(full.rows.some((r) => r.key === 'demo/a' && r.node === node && r.role === role), `the table has demo/a ${role} at ${node}: ${JSON.stringify(full.rows)}`);
  }

  step('screenshot of the Live view');
  // Two more seconds of points make a chart worth looking at.
  const shown = ratePoints(full);
  await waitFor('two more reports', async () => ratePoints(await page.evaluate(liveSummary)) >= shown + 4, 30000, 250);
  await page.screenshot({ path: join(OUT_DIR, 'dashboard-live.png'), fullPage: true });
  await page.close();
  await dashboard.stopCleanly();
}

async function notConnected(browser, problems) {
  step('without --connect, the Live view says how to turn it on');
  const dashboard = await startDashboard(join(tempDir(), 'none.db'));
  const page = await openPage(browser, dashboard.url, problems);
  await waitFor('the page to connect', async () => (await page.textContent('#connection')) === 'live', 15000);
  await page.click('.tabs button[data-view="live"]');
  const s = await page.evaluate(liveSummary);
  check(!s.hidden && s.off && s.offText.includes('--connect'), `the notice: ${JSON.stringify(s)}`);
  check(s.nodes.length === 0, 'no graph');
  await page.close();
  await dashboard.stopCleanly();
}

await main('dashboard_browser_live', async () => {
  const browser = await launchChromium();
  const problems = [];
  step('a network: router live-R, subscriber live-S, publisher live-P');
  const network = await startNetwork();
  try {
    await watch(browser, problems, network);
    await notConnected(browser, problems);
  } finally {
    await network.stop();
    await browser.close();
  }
  check(problems.length === 0, `the page reported problems:\n${problems.join('\n')}`);
});
