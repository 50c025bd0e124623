// trend-view.js: one cell (link, layer, mode, records per message) across
// every run that measured it, oldest first: a point per run at the median of
// its repeats, and a band from their minimum to their maximum (Chart.js's
// own fill between two datasets).
//
// Honest by default: records/s is a rate, so the y axis starts at zero and a
// change of 0.4% looks like one; "zoom to the data" fits the axis to the
// points instead, with as many digits as its ticks need to differ. A step
// from one run to the next is called a drop (red) or a rise (green) only when
// both runs were measured several times, their ranges of repeats do not
// overlap and the medians differ by more than THRESHOLD percent; otherwise
// it is "within the spread", or "untested" with one sample a side. With runs
// of several hosts (`tern bench import`), "one line per host" draws each
// host's runs as a line of its own, and a step compares runs of one host.
// Open-loop rows (--rate) are left out: their records/s is the rate they
// were sent at.

import { el, clear, formatChange, formatDate, percentChange, rateFormatter, text } from './dom.js';
import { summarize } from './cells.js';

const THRESHOLD = 5;
const LINE = '#1f6fd1';
const BAD = '#c0392b';
const GOOD = '#1e8449';
const HOST_COLORS = ['#1f6fd1', '#e07b00', '#2a9d55', '#8e44ad', '#b03a2e', '#5d6d7e'];

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

// The step from one run's summary to the next: {change (%), kind}, kind one of
// 'drop', 'rise' (beyond the spread and the threshold), 'within' or 'untested'.
export function stepVerdict(before, after) {
  const change = percentChange(before.median, after.median);
  if (before.n < 2 || after.n < 2 || change === null) {
    return { change, kind: 'untested' };
  }
  if (after.max < before.min && change < -THRESHOLD) {
    return { change, kind: 'drop' };
  }
  if (after.min > before.max && change > THRESHOLD) {
    return { change, kind: 'rise' };
  }
  return { change, kind: 'within' };
}

const STEP_TEXT = { drop: 'drop beyond the spread', rise: 'rise beyond the spread', within: 'within the spread', untested: 'one sample: untested' };

// A tick label of a linear axis: in the unit of the largest tick (k, M, G),
// with the fewest decimals that write every tick exactly, so no two ticks
// read alike however close the values are.
export function axisLabel(value, index, ticks) {
  if (value === 0) {
    return '0';
  }
  const top = Math.max(...ticks.map((t) => Math.abs(t.value)));
  const [size, unit] = top >= 1e9 ? [1e9, ' G'] : top >= 1e6 ? [1e6, ' M'] : top >= 1e3 ? [1e3, ' k'] : [1, ''];
  let digits = 0;
  while (digits < 8 && !ticks.every((t) => {
    const scaled = (t.value / size) * 10 ** digits;
    return Math.abs(scaled - Math.round(scaled)) < 1e-6 * Math.max(1, Math.abs(scaled));
  })) {
    digits++;
  }
  return (value / size).toFixed(digits) + unit;
}

export class TrendView {
  constructor(container, connection) {
    this.container = container;
    this.connection = connection;
    this.cell = null;
    this.chart = null;
    this.points = [];
    this.selects = {};
    // Set by the page: what "show" does (it puts the cell in the URL first).
    this.onShow = (cell) => this.request(cell);
    this.form = el('form', { class: 'picker', onsubmit: (event) => { event.preventDefault(); this.onShow(this.formCell()); } });
    for (const name of ['link', 'layer', 'mode', 'records_per_msg', 'keys']) {
      const select = el('select', { name, 'aria-label': name });
      this.selects[name] = select;
      this.form.append(el('label', {}, name.replace(/_/g, ' '), select));
    }
    this.form.append(el('button', { type: 'submit', text: 'show' }));
    this.zoom = el('input', { type: 'checkbox', name: 'zoom', onchange: () => this.render(this.points) });
    this.perHost = el('input', { type: 'checkbox', name: 'per_host', onchange: () => this.render(this.points) });
    this.hostLabel = el('label', {}, this.perHost, ' one line per host');
    this.title = el('h2', { text: 'Trend' });
    this.status = el('p', { class: 'muted', text: 'Pick a cell, or click a point in a run chart.' });
    this.canvas = el('canvas', { class: 'trend-chart', role: 'img', 'aria-label': 'records per second across runs' });
    this.table = el('div', { class: 'trend-table' });
    container.append(
      this.title,
      this.form,
      el('div', { class: 'trend-options' }, el('label', {}, this.zoom, ' zoom to the data (the axis starts at 0 otherwise)'), this.hostLabel),
      this.status,
      el('div', { class: 'canvas-box tall' }, this.canvas),
      this.table,
    );
  }

  // Fills the pickers with the cells of the selected run.
  setCells(cells) {
    const values = (key) => [...new Set(cells.map((c) => (key === 'keys' ? c.keys ?? 1 : c[key])))].sort((a, b) => (typeof a === 'number' ? a - b : String(a).localeCompare(String(b))));
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
      keys: Number(this.selects.keys.value) || 1,
    };
  }

  static valid(cell) {
    return Boolean(cell && cell.link && cell.layer && cell.mode && Number.isFinite(cell.records_per_msg) && cell.records_per_msg >= 0);
  }

  matches(result) {
    const c = this.cell;
    return c && result.scenario === c.scenario && result.link === c.link && result.layer === c.layer && result.mode === c.mode && result.records_per_msg === c.records_per_msg && (result.keys ?? 1) === (c.keys ?? 1);
  }

  async request(cell) {
    if (!TrendView.valid(cell)) {
      return;
    }
    cell = { ...cell, keys: cell.keys ?? 1 };
    this.cell = cell;
    for (const name of Object.keys(this.selects)) {
      const select = this.selects[name];
      if (![...select.options].some((o) => o.value === String(cell[name]))) {
        select.append(el('option', { value: String(cell[name]), text: String(cell[name]) }));
      }
      select.value = String(cell[name]);
    }
    this.title.textContent = `Trend: ${cell.link}, ${cell.layer} ${cell.mode}, ${cell.records_per_msg} records per message${cell.keys > 1 ? `, over ${cell.keys} keys` : ''}`;
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
    if (this.cell !== cell) {
      return; // another cell was asked for meanwhile
    }
    this.render(reply.points || []);
    // Which cell the chart and table show now (the title changes at the request).
    this.container.dataset.shown = `${cell.link} ${cell.layer} ${cell.mode} ${cell.records_per_msg}${cell.keys > 1 ? ` ${cell.keys}` : ''}`;
  }

  // The lines to draw: one, or one per host; each with its runs (oldest
  // first) and the verdict of each step from the line's previous run.
  lines(runs) {
    const hosts = [...new Set(runs.map((r) => r.run_host ?? ''))];
    const groups = this.perHost.checked && hosts.length > 1 ? hosts.map((host) => ({ host, runs: runs.filter((r) => (r.run_host ?? '') === host) })) : [{ host: null, runs }];
    return groups.map((g, i) => {
      let before = null;
      const steps = new Map();
      for (const run of g.runs) {
        if (!run.stats) {
          continue;
        }
        steps.set(run.run_id, before ? stepVerdict(before.stats, run.stats) : null);
        before = run;
      }
      return { ...g, color: g.host === null ? LINE : HOST_COLORS[i % HOST_COLORS.length], steps };
    });
  }

  render(points) {
    this.points = points;
    const runs = runsOf(points);
    const hosts = new Set(runs.map((r) => r.run_host ?? ''));
    this.hostLabel.hidden = hosts.size < 2;
    const lines = this.lines(runs);
    const steps = lines.flatMap((l) => [...l.steps.values()]).filter(Boolean);
    const count = (kind) => steps.filter((s) => s.kind === kind).length;
    const repeated = runs.some((r) => r.stats && r.stats.n > 1);
    const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;
    this.status.textContent =
      `${plural(runs.length, 'run')} measured this cell` +
      (hosts.size > 1 ? ` on ${hosts.size} hosts` : '') +
      (repeated ? '; a point is the median of a run\'s repeats, the band their range (min–max)' : '') +
      `; ${plural(count('drop'), 'drop')} and ${plural(count('rise'), 'rise')} beyond the spread and ${THRESHOLD}%, ${count('within')} within the spread` +
      (count('untested') ? `, ${count('untested')} untested (one sample a side)` : '') +
      '.';
    this.renderChart(runs.filter((r) => r.stats), lines);
    this.renderTable(runs, lines);
  }

  renderChart(ok, lines) {
    const Chart = typeof window.Chart === 'function' ? window.Chart : null;
    if (!Chart) {
      return;
    }
    const labels = ok.map((r) => `#${r.run_id}`);
    const datasets = [];
    for (const line of lines) {
      // null where a run is another line's: spanGaps joins the line's own runs.
      const mine = ok.map((r) => (line.runs.includes(r) ? r : null));
      const color = (r) => {
        const step = r && line.steps.get(r.run_id);
        return step && step.kind === 'drop' ? BAD : step && step.kind === 'rise' ? GOOD : line.color;
      };
      const band = { band: true, host: line.host, borderWidth: 0, pointRadius: 0, pointHoverRadius: 0, backgroundColor: `${line.color}2e`, tension: 0, spanGaps: true };
      datasets.push(
        { ...band, label: 'min of repeats', data: mine.map((r) => (r ? r.stats.min : null)), fill: false },
        { ...band, label: 'max of repeats', data: mine.map((r) => (r ? r.stats.max : null)), fill: '-1' },
        {
          label: line.host === null ? 'records/s (median)' : line.host || '(no host)',
          host: line.host,
          data: mine.map((r) => (r ? r.stats.median : null)),
          runs: mine,
          borderColor: line.color,
          backgroundColor: line.color,
          pointBackgroundColor: mine.map(color),
          pointBorderColor: mine.map(color),
          pointRadius: mine.map((r) => (color(r) === line.color ? 4 : 7)),
          segment: { borderColor: (ctx) => color(mine[ctx.p1DataIndex]) },
          spanGaps: true,
          fill: false,
        },
      );
    }
    const zoom = this.zoom.checked;
    const options = {
      animation: false,
      maintainAspectRatio: false,
      scales: {
        x: { title: { display: true, text: 'run' } },
        // A rate: from zero, unless asked to zoom; grace keeps a zoomed band off the edges.
        y: { beginAtZero: !zoom, grace: zoom ? '5%' : 0, title: { display: true, text: 'records/s' }, ticks: { callback: axisLabel } },
      },
      plugins: {
        legend: { display: lines.length > 1, labels: { filter: (item, data) => !data.datasets[item.datasetIndex].band } },
        tooltip: {
          filter: (item) => !item.dataset.band,
          callbacks: {
            label: (ctx) => {
              const run = ctx.dataset.runs[ctx.dataIndex];
              if (!run) {
                return '';
              }
              const line = lines.find((l) => l.host === ctx.dataset.host);
              const step = line && line.steps.get(run.run_id);
              const format = rateFormatter([run.stats.min, run.stats.median, run.stats.max]);
              const spread = run.stats.n > 1 ? `, median of ${run.stats.n}: ${format(run.stats.min)}–${format(run.stats.max)}` : ', one sample';
              const change = step ? ` (${step.change >= 0 ? '+' : ''}${step.change.toFixed(2)}%: ${STEP_TEXT[step.kind]})` : '';
              return `${run.run_host ? `${run.run_host}: ` : ''}${format(ctx.parsed.y)} records/s${spread}${change}`;
            },
          },
        },
      },
    };
    if (this.chart) {
      this.chart.data = { labels, datasets };
      this.chart.options = options;
      this.chart.update('none');
      return;
    }
    this.chart = new Chart(this.canvas, { type: 'line', data: { labels, datasets }, options });
  }

  // One row per run: the median of its repeats and their range, and the step from the line's previous run.
  renderTable(runs, lines) {
    clear(this.table);
    const stepOf = (run) => {
      for (const line of lines) {
        if (line.steps.has(run.run_id)) {
          return line.steps.get(run.run_id);
        }
      }
      return null;
    };
    // Digits enough to tell apart every figure of the table.
    const format = rateFormatter(runs.flatMap((r) => (r.stats ? [r.stats.median, r.stats.min, r.stats.max] : [])));
    const rows = runs.map((r) => {
      const s = r.stats;
      const step = s ? stepOf(r) : null;
      const figure = !s
        ? `failed: ${text(r.rows.find((x) => x.failed)?.error)}`
        : s.n > 1
          ? `${format(s.median)} (${format(s.min)}–${format(s.max)})`
          : format(s.median);
      const kind = !s ? 'failed' : step && step.kind === 'drop' ? 'regression' : step && step.kind === 'rise' ? 'rise' : '';
      return el(
        'tr',
        { class: kind, dataset: { step: step ? step.kind : '' } },
        el('td', { text: `#${r.run_id}` }),
        el('td', { text: formatDate(r.run_started_at) }),
        el('td', { text: text(r.run_host) }),
        el('td', { text: text(r.run_note) }),
        el('td', { text: text(r.run_tern_version) }),
        el('td', { class: 'num', text: figure }),
        el('td', { class: 'num', text: r.ok < r.rows.length ? `${r.ok} of ${r.rows.length}` : String(r.rows.length) }),
        el('td', { class: 'num', text: step ? `${formatChange(100, 100 + step.change)}` : '' }),
        el('td', { class: 'step', text: step ? STEP_TEXT[step.kind] : '' }),
      );
    });
    this.table.append(
      el(
        'table',
        { class: 'data' },
        el('thead', {}, el('tr', {}, ...['run', 'date', 'host', 'note', 'tern', 'records/s: median (min–max)', 'repeats', 'vs previous', 'verdict'].map((h) => el('th', { text: h })))),
        el('tbody', {}, rows),
      ),
    );
  }
}
