// compare-view.js: two runs side by side, cell by cell, with the change in
// percent from the baseline (A) to the other run (B).

import { el, clear, formatChange, formatRate, percentChange } from './dom.js';

const NOTABLE = 5;

function cellKey(r) {
  return `${r.scenario}|${r.link}|${r.layer}|${r.mode}|${r.records_per_msg}|${r.concurrency ?? 1}|${r.batch_bytes ?? ''}`;
}

export class CompareView {
  constructor(container, connection) {
    this.container = container;
    this.connection = connection;
    this.runA = el('select', { name: 'a', 'aria-label': 'baseline run' });
    this.runB = el('select', { name: 'b', 'aria-label': 'compared run' });
    this.status = el('p', { class: 'muted', text: 'Pick two runs.' });
    this.table = el('div', { class: 'compare-table' });
    const form = el(
      'form',
      { class: 'picker', onsubmit: (event) => { event.preventDefault(); this.compare(Number(this.runA.value), Number(this.runB.value)); } },
      el('label', {}, 'baseline A', this.runA),
      el('label', {}, 'run B', this.runB),
      el('button', { type: 'submit', text: 'compare' }),
    );
    container.append(el('h2', { text: 'Compare two runs' }), form, this.status, this.table);
  }

  // Refreshes the run pickers; by default B is the selected run and A the one before it.
  setRuns(runs, selectedId) {
    const keepA = this.runA.value;
    const keepB = this.runB.value;
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

  async compare(a, b) {
    if (!(a > 0) || !(b > 0)) {
      return;
    }
    this.status.textContent = `Loading runs #${a} and #${b}…`;
    let replies;
    try {
      replies = await Promise.all([this.connection.request({ type: 'run', run_id: a }), this.connection.request({ type: 'run', run_id: b })]);
    } catch (error) {
      this.status.textContent = `Not connected: ${error.message}`;
      return;
    }
    const failed = replies.find((r) => r.type === 'error');
    if (failed) {
      this.status.textContent = failed.error;
      return;
    }
    this.render(replies[0], replies[1]);
  }

  render(a, b) {
    this.shown = true;
    clear(this.table);
    const cells = new Map();
    for (const [side, reply] of [['a', a], ['b', b]]) {
      for (const r of reply.results || []) {
        const key = cellKey(r);
        const entry = cells.get(key) || { cell: r };
        entry[side] = r;
        cells.set(key, entry);
      }
    }
    const entries = [...cells.values()].sort(
      (x, y) =>
        x.cell.scenario.localeCompare(y.cell.scenario) ||
        x.cell.link.localeCompare(y.cell.link) ||
        x.cell.layer.localeCompare(y.cell.layer) ||
        x.cell.mode.localeCompare(y.cell.mode) ||
        x.cell.records_per_msg - y.cell.records_per_msg,
    );
    const value = (r) => (!r ? 'not run' : r.failed ? 'failed' : formatRate(r.records_per_s));
    let better = 0;
    let worse = 0;
    const rows = entries.map(({ cell, a: ra, b: rb }) => {
      const change = ra && rb && !ra.failed && !rb.failed ? percentChange(ra.records_per_s, rb.records_per_s) : null;
      if (change !== null && change > NOTABLE) {
        better++;
      }
      if (change !== null && change < -NOTABLE) {
        worse++;
      }
      return el(
        'tr',
        { class: change === null ? '' : change < -NOTABLE ? 'worse' : change > NOTABLE ? 'better' : '' },
        el('td', { text: cell.scenario }),
        el('td', { text: cell.link }),
        el('td', { text: `${cell.layer} ${cell.mode}` }),
        el('td', { class: 'num', text: cell.records_per_msg }),
        el('td', { class: 'num', text: value(ra) }),
        el('td', { class: 'num', text: value(rb) }),
        el('td', { class: 'num change', text: change === null ? '–' : formatChange(ra.records_per_s, rb.records_per_s) }),
      );
    });
    this.status.textContent = `Run #${a.run_id} (A) against run #${b.run_id} (B), records/s: ${better} cells faster by more than ${NOTABLE}%, ${worse} slower.`;
    this.table.append(
      el(
        'table',
        { class: 'data' },
        el('thead', {}, el('tr', {}, ...['scenario', 'link', 'layer mode', 'rec/msg', `A #${a.run_id}`, `B #${b.run_id}`, 'change'].map((h) => el('th', { text: h })))),
        el('tbody', {}, rows),
      ),
    );
  }
}
