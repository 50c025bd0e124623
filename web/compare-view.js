// compare-view.js: two runs side by side with the verdicts of `tern bench
// compare`. The server runs bench/compare.c on the database and sends its
// report, so the page judges nothing itself: a cell is coloured only where the
// command calls it a regression (red) or an improvement (green), that is where
// Welch's t-test over the repeats finds the change significant (p < alpha) and
// it is beyond the threshold. A cell measured once a side is never a verdict.
// What differs in the two runs' environments comes first.

import { el, clear, formatRate, formatSize } from './dom.js';

const UNITS = { records_per_s: 'rec/s', bytes_per_s: 'B/s', lat_p99_us: 'p99 µs' };

// What tells the cell apart within its link and layer, as the bench's progress line says it.
function cellSize(c) {
  if (c.scenario === 'pingpong') {
    return `${c.concurrency} in flight`;
  }
  if (c.scenario === 'bytes') {
    return formatSize(c.payload_bytes);
  }
  if (c.scenario === 'fanin') {
    return `${c.concurrency} conns${c.batch_bytes ? ` ${formatSize(c.batch_bytes)}` : ''}`;
  }
  return `${c.records_per_msg} rec/msg${c.keys > 1 ? ` over ${c.keys} keys` : ''}${c.rate ? ` @ ${formatRate(c.rate)}/s` : ''}`;
}

// "3.76 M ±2.1%" (mean and relative standard deviation, as the command prints it).
function sampleText(s, metric) {
  if (!s || s.n === 0) {
    return s && s.failed ? 'failed' : '–';
  }
  const value = metric === 'lat_p99_us' ? s.mean.toFixed(0) : formatRate(s.mean);
  return s.n > 1 && s.mean !== 0 ? `${value} ±${((s.sd / s.mean) * 100).toFixed(1)}%` : value;
}

// As the command prints it (%.3g): 0.00312, 1.72e-5.
function formatP(p) {
  if (p === 0) {
    return '0';
  }
  return p < 1e-4 ? p.toExponential(2).replace(/\.?0+e/, 'e') : String(Number(p.toPrecision(3)));
}

// The hover text of a cell: its p-value and samples, or why it has no test.
export function verdictTitle(c) {
  const n = `n = ${c.a.n}/${c.b.n}`;
  if (c.verdict === 'failed') {
    return `failed: every repeat of the second run failed (${n})`;
  }
  if (!c.tested) {
    return `one sample: untested (${n})`;
  }
  return `${c.verdict}: p = ${formatP(c.p)}, ${n}`;
}

export class CompareView {
  constructor(container, connection) {
    this.container = container;
    this.connection = connection;
    this.runA = el('select', { name: 'a', 'aria-label': 'baseline run' });
    this.runB = el('select', { name: 'b', 'aria-label': 'compared run' });
    this.status = el('p', { class: 'muted', text: 'Pick two runs.' });
    this.environment = el('div', { class: 'compare-env' });
    this.table = el('div', { class: 'compare-table' });
    this.chosen = null;
    // Set by the page: what "compare" does (it puts the pair in the URL first).
    this.onCompare = (a, b) => this.compare(a, b);
    const form = el(
      'form',
      { class: 'picker', onsubmit: (event) => { event.preventDefault(); this.onCompare(Number(this.runA.value), Number(this.runB.value)); } },
      el('label', {}, 'baseline A', this.runA),
      el('label', {}, 'run B', this.runB),
      el('button', { type: 'submit', text: 'compare' }),
    );
    container.append(el('h2', { text: 'Compare two runs' }), form, this.status, this.environment, this.table);
  }

  // Refreshes the run pickers; by default B is the selected run and A the one
  // before it; a pair compared (or named in the URL) stays chosen.
  setRuns(runs, selectedId) {
    const keepA = this.chosen ? String(this.chosen.a) : this.runA.value;
    const keepB = this.chosen ? String(this.chosen.b) : this.runB.value;
    for (const select of [this.runA, this.runB]) {
      clear(select);
      for (const run of runs) {
        const label = `#${run.id} ${run.started_at ?? ''} ${run.note ?? ''}`.slice(0, 80);
        select.append(el('option', { value: String(run.id), text: label }));
      }
    }
    const index = runs.findIndex((r) => r.id === selectedId);
    const b = keepB || (index >= 0 ? String(runs[index].id) : runs[0] ? String(runs[0].id) : '');
    const aRun = runs[index + 1] || runs[1];
    const a = keepA || (aRun ? String(aRun.id) : b);
    this.runA.value = a;
    this.runB.value = b;
  }

  // The pair in the pickers now, or null.
  pair() {
    const a = Number(this.runA.value);
    const b = Number(this.runB.value);
    return a > 0 && b > 0 ? { a, b } : null;
  }

  async compare(a, b) {
    if (!(a > 0) || !(b > 0)) {
      return;
    }
    this.chosen = { a, b };
    for (const [select, id] of [[this.runA, a], [this.runB, b]]) {
      if (![...select.options].some((o) => o.value === String(id))) {
        select.append(el('option', { value: String(id), text: `#${id}` }));
      }
      select.value = String(id);
    }
    this.status.textContent = `Comparing runs #${a} and #${b}…`;
    let reply;
    try {
      reply = await this.connection.request({ type: 'compare', a, b });
    } catch (error) {
      this.status.textContent = `Not connected: ${error.message}`;
      return;
    }
    if (this.chosen.a !== a || this.chosen.b !== b) {
      return; // another pair was asked for meanwhile
    }
    if (reply.type === 'error') {
      this.status.textContent = reply.error;
      clear(this.environment);
      clear(this.table);
      return;
    }
    this.render(reply);
  }

  render(report) {
    this.shown = true;
    const s = report.summary;
    const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;
    this.status.textContent =
      `Run #${report.a} (A) against run #${report.b} (B), ${plural(s.cells, 'cell')} in both: ` +
      `${plural(s.regressions, 'regression')}, ${plural(s.improvements, 'improvement')}, ${s.same} same` +
      (s.untested ? ` (${s.untested} untested: one sample a side)` : '') +
      (s.only_a || s.only_b ? `; ${s.only_a} only in A, ${s.only_b} only in B` : '') +
      `. A verdict needs p < ${report.alpha} (Welch's t-test over the repeats) and a change beyond ${report.threshold_pct}%.`;
    this.renderEnvironment(report);
    this.renderCells(report);
  }

  renderEnvironment(report) {
    clear(this.environment);
    const diffs = report.environment || [];
    if (diffs.length === 0) {
      this.environment.append(el('p', { class: 'same-env', text: 'same environment' }));
      return;
    }
    const value = (v) => (v === null || v === undefined ? '(none)' : String(v));
    this.environment.append(
      el(
        'table',
        { class: 'data env-diff' },
        el('caption', { text: 'environment differences' }),
        el('thead', {}, el('tr', {}, ...['', `A #${report.a}`, `B #${report.b}`].map((h) => el('th', { text: h })))),
        el('tbody', {}, diffs.map((d) => el('tr', {}, el('th', { text: d.name }), el('td', { text: value(d.a) }), el('td', { text: value(d.b) })))),
      ),
    );
  }

  renderCells(report) {
    clear(this.table);
    const rows = report.cells.map((c) => {
      const title = verdictTitle(c);
      const change = typeof c.change_pct === 'number' ? `${c.change_pct >= 0 ? '+' : ''}${c.change_pct.toFixed(1)}%` : '–';
      return el(
        'tr',
        { class: `cell verdict-${c.verdict}`, title, dataset: { verdict: c.verdict } },
        el('td', { text: c.scenario }),
        el('td', { text: c.link }),
        el('td', { text: `${c.layer} ${c.mode}` }),
        el('td', { text: cellSize(c) }),
        el('td', { text: UNITS[c.metric] || c.metric }),
        el('td', { class: 'num', text: sampleText(c.a, c.metric) }),
        el('td', { class: 'num', text: sampleText(c.b, c.metric) }),
        el('td', { class: 'num change', title, text: change }),
        el('td', { class: 'num', text: c.tested ? formatP(c.p) : '–' }),
        el('td', { class: 'num', text: `${c.a.n}/${c.b.n}` }),
        el('td', { class: 'verdict', title }, c.verdict === 'failed' ? el('span', { class: 'badge failed', text: '✗ failed' }) : c.verdict, c.tested || c.verdict === 'failed' ? '' : el('span', { class: 'muted', text: ' (untested)' })),
      );
    });
    this.table.append(
      el(
        'table',
        { class: 'data compare' },
        el('thead', {}, el('tr', {}, ...['scenario', 'link', 'layer mode', 'size', 'figure', `A #${report.a}`, `B #${report.b}`, 'change', 'p', 'n', 'verdict'].map((h) => el('th', { text: h })))),
        el('tbody', {}, rows),
      ),
    );
  }
}
