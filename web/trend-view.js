// trend-view.js: one cell (link, layer, mode, records per message) across
// every run that measured it, oldest first: a point per run at the median of
// its repeats, and a band from their minimum to their maximum (Chart.js's
// own fill between two datasets). A drop of the median by more than
// REGRESSION percent from the previous run is drawn in red and flagged in the
// table. Open-loop rows (--rate) of the same cell are left out: their
// records/s is the rate they were sent at.

import { el, clear, formatChange, formatDate, formatRate, percentChange, text } from './dom.js';
import { summarize } from './cells.js';

const REGRESSION = 10;
const LINE = '#1f6fd1';
const BAD = '#c0392b';
const BAND = 'rgba(31, 111, 209, 0.18)';

// The points of a trend (one per row) as one entry per run, oldest first:
// the run's fields, its rows, and the summary of its successful repeats (null
// when every repeat failed).
function runsOf(points) {
  const runs = new Map();
  for (const p of points.filter((x) => !(x.rate > 0))) {
    if (!runs.has(p.run_id)) {
      runs.set(p.run_id, { ...p, rows: [] });
    }
    runs.get(p.run_id).rows.push(p);
  }
  return [...runs.values()].map((run) => {
    const ok = run.rows.filter((r) => !r.failed);
    return { ...run, ok: ok.length, stats: summarize(ok.map((r) => r.records_per_s)) };
  });
}

export class TrendView {
  constructor(container, connection) {
    this.container = container;
    this.connection = connection;
    this.cell = null;
    this.chart = null;
    this.selects = {};
    this.form = el('form', { class: 'picker', onsubmit: (event) => { event.preventDefault(); this.request(this.formCell()); } });
    for (const name of ['link', 'layer', 'mode', 'records_per_msg']) {
      const select = el('select', { name, 'aria-label': name });
      this.selects[name] = select;
      this.form.append(el('label', {}, name.replace(/_/g, ' '), select));
    }
    this.form.append(el('button', { type: 'submit', text: 'show' }));
    this.title = el('h2', { text: 'Trend' });
    this.status = el('p', { class: 'muted', text: 'Pick a cell, or click a point in a run chart.' });
    this.canvas = el('canvas', { class: 'trend-chart', role: 'img', 'aria-label': 'records per second across runs' });
    this.table = el('div', { class: 'trend-table' });
    container.append(this.title, this.form, this.status, el('div', { class: 'canvas-box tall' }, this.canvas), this.table);
  }

  // Fills the pickers with the cells of the selected run.
  setCells(cells) {
    const values = (key) => [...new Set(cells.map((c) => c[key]))].sort((a, b) => (typeof a === 'number' ? a - b : String(a).localeCompare(String(b))));
    for (const [name, select] of Object.entries(this.selects)) {
      const current = this.cell ? String(this.cell[name]) : select.value;
      clear(select);
      for (const value of values(name)) {
        select.append(el('option', { value: String(value), text: String(value) }));
      }
      if ([...select.options].some((o) => o.value === current)) {
        select.value = current;
      }
    }
  }

  formCell() {
    return {
      scenario: 'stream',
      link: this.selects.link.value,
      layer: this.selects.layer.value,
      mode: this.selects.mode.value,
      records_per_msg: Number(this.selects.records_per_msg.value),
    };
  }

  matches(result) {
    const c = this.cell;
    return c && result.scenario === c.scenario && result.link === c.link && result.layer === c.layer && result.mode === c.mode && result.records_per_msg === c.records_per_msg;
  }

  async request(cell) {
    if (!cell.link || !cell.layer || !cell.mode || !Number.isFinite(cell.records_per_msg)) {
      return;
    }
    this.cell = cell;
    for (const name of Object.keys(this.selects)) {
      const select = this.selects[name];
      if (![...select.options].some((o) => o.value === String(cell[name]))) {
        select.append(el('option', { value: String(cell[name]), text: String(cell[name]) }));
      }
      select.value = String(cell[name]);
    }
    this.title.textContent = `Trend: ${cell.link}, ${cell.layer} ${cell.mode}, ${cell.records_per_msg} records per message`;
    let reply;
    try {
      reply = await this.connection.request({ type: 'trend', ...cell });
    } catch (error) {
      this.status.textContent = `Not connected: ${error.message}`;
      return;
    }
    if (reply.type === 'error') {
      this.status.textContent = reply.error;
      return;
    }
    this.render(reply.points || []);
    // Which cell the chart and table show now (the title changes at the request).
    this.container.dataset.shown = `${cell.link} ${cell.layer} ${cell.mode} ${cell.records_per_msg}`;
  }

  render(points) {
    const runs = runsOf(points);
    const ok = runs.filter((r) => r.stats);
    const changes = ok.map((r, i) => (i === 0 ? null : percentChange(ok[i - 1].stats.median, r.stats.median)));
    const regressions = changes.filter((c) => c !== null && c < -REGRESSION).length;
    const repeated = ok.some((r) => r.stats.n > 1);
    this.status.textContent =
      `${runs.length} run${runs.length === 1 ? '' : 's'} measured this cell` +
      (repeated ? '; a point is the median of a run\'s repeats, the band their range (min–max)' : '') +
      (regressions ? `; ${regressions} drop${regressions === 1 ? '' : 's'} of more than ${REGRESSION}% (red)` : '');
    this.renderChart(ok, changes);
    this.renderTable(runs);
  }

  renderChart(ok, changes) {
    const Chart = typeof window.Chart === 'function' ? window.Chart : null;
    if (!Chart) {
      return;
    }
    const colors = changes.map((c) => (c !== null && c < -REGRESSION ? BAD : LINE));
    // The band: the minimum of each run's repeats, then the maximum filled down to it.
    const band = { band: true, borderWidth: 0, pointRadius: 0, pointHoverRadius: 0, backgroundColor: BAND, tension: 0 };
    const data = {
      labels: ok.map((r) => `#${r.run_id}`),
      datasets: [
        { ...band, label: 'min of repeats', data: ok.map((r) => r.stats.min), fill: false },
        { ...band, label: 'max of repeats', data: ok.map((r) => r.stats.max), fill: '-1' },
        {
          label: 'records/s (median)',
          data: ok.map((r) => r.stats.median),
          borderColor: LINE,
          pointBackgroundColor: colors,
          pointBorderColor: colors,
          pointRadius: changes.map((c) => (c !== null && c < -REGRESSION ? 7 : 4)),
          segment: { borderColor: (ctx) => (colors[ctx.p1DataIndex] === BAD ? BAD : LINE) },
          fill: false,
        },
      ],
    };
    this.plotted = ok;
    if (this.chart) {
      this.chart.data = data;
      this.chart.update('none');
      return;
    }
    this.chart = new Chart(this.canvas, {
      type: 'line',
      data,
      options: {
        animation: false,
        maintainAspectRatio: false,
        scales: {
          x: { title: { display: true, text: 'run' } },
          y: { title: { display: true, text: 'records/s' }, ticks: { callback: (v) => formatRate(v) } },
        },
        plugins: {
          legend: { display: false },
          tooltip: {
            filter: (item) => !item.dataset.band,
            callbacks: {
              label: (ctx) => {
                const run = this.plotted[ctx.dataIndex];
                const spread = run && run.stats.n > 1 ? `, median of ${run.stats.n}: ${formatRate(run.stats.min)}–${formatRate(run.stats.max)}` : '';
                const before = ctx.dataIndex > 0 ? this.plotted[ctx.dataIndex - 1].stats.median : null;
                return `${formatRate(ctx.parsed.y)} records/s${spread} (${formatChange(before, ctx.parsed.y)})`;
              },
            },
          },
        },
      },
    });
  }

  // One row per run: the median of its repeats and their range.
  renderTable(runs) {
    clear(this.table);
    let previous = null;
    const rows = runs.map((r) => {
      const s = r.stats;
      const change = s ? percentChange(previous, s.median) : null;
      const figure = !s
        ? `failed: ${text(r.rows.find((x) => x.failed)?.error)}`
        : s.n > 1
          ? `${formatRate(s.median)} (${formatRate(s.min)}–${formatRate(s.max)})`
          : formatRate(s.median);
      const row = el(
        'tr',
        { class: !s ? 'failed' : change !== null && change < -REGRESSION ? 'regression' : '' },
        el('td', { text: `#${r.run_id}` }),
        el('td', { text: formatDate(r.run_started_at) }),
        el('td', { text: text(r.run_note) }),
        el('td', { text: text(r.run_tern_version) }),
        el('td', { class: 'num', text: figure }),
        el('td', { class: 'num', text: r.ok < r.rows.length ? `${r.ok} of ${r.rows.length}` : String(r.rows.length) }),
        el('td', { class: 'num', text: s ? formatChange(previous, s.median) : '' }),
      );
      if (s) {
        previous = s.median;
      }
      return row;
    });
    this.table.append(
      el(
        'table',
        { class: 'data' },
        el('thead', {}, el('tr', {}, ...['run', 'date', 'note', 'tern', 'records/s: median (min–max)', 'repeats', 'vs previous'].map((h) => el('th', { text: h })))),
        el('tbody', {}, rows),
      ),
    );
  }
}
