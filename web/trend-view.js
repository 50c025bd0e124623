// trend-view.js: one cell (link, layer, mode, records per message) across
// every run that measured it, oldest first. A drop of more than REGRESSION
// percent from the previous run is drawn in red and flagged in the table.

import { el, clear, formatChange, formatDate, formatRate, percentChange, text } from './dom.js';

const REGRESSION = 10;

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
  }

  render(points) {
    const ok = points.filter((p) => !p.failed);
    const changes = ok.map((p, i) => (i === 0 ? null : percentChange(ok[i - 1].records_per_s, p.records_per_s)));
    const regressions = changes.filter((c) => c !== null && c < -REGRESSION).length;
    this.status.textContent = `${points.length} run${points.length === 1 ? '' : 's'} measured this cell` + (regressions ? `; ${regressions} drop${regressions === 1 ? '' : 's'} of more than ${REGRESSION}% (red)` : '');
    this.renderChart(ok, changes);
    this.renderTable(points);
  }

  renderChart(ok, changes) {
    const Chart = typeof window.Chart === 'function' ? window.Chart : null;
    if (!Chart) {
      return;
    }
    const colors = changes.map((c) => (c !== null && c < -REGRESSION ? '#c0392b' : '#1f6fd1'));
    const data = {
      labels: ok.map((p) => `#${p.run_id}`),
      datasets: [
        {
          label: 'records/s',
          data: ok.map((p) => p.records_per_s),
          borderColor: '#1f6fd1',
          pointBackgroundColor: colors,
          pointBorderColor: colors,
          pointRadius: changes.map((c) => (c !== null && c < -REGRESSION ? 7 : 4)),
          segment: { borderColor: (ctx) => (colors[ctx.p1DataIndex] === '#c0392b' ? '#c0392b' : '#1f6fd1') },
        },
      ],
    };
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
          tooltip: { callbacks: { label: (ctx) => `${formatRate(ctx.parsed.y)} records/s (${formatChange(ctx.dataIndex > 0 ? ok[ctx.dataIndex - 1].records_per_s : null, ctx.parsed.y)})` } },
        },
      },
    });
  }

  renderTable(points) {
    clear(this.table);
    let previous = null;
    const rows = points.map((p) => {
      const change = p.failed ? null : percentChange(previous, p.records_per_s);
      const row = el(
        'tr',
        { class: p.failed ? 'failed' : change !== null && change < -REGRESSION ? 'regression' : '' },
        el('td', { text: `#${p.run_id}` }),
        el('td', { text: formatDate(p.run_started_at) }),
        el('td', { text: text(p.run_note) }),
        el('td', { text: text(p.run_tern_version) }),
        el('td', { class: 'num', text: p.failed ? `failed: ${text(p.error)}` : formatRate(p.records_per_s) }),
        el('td', { class: 'num', text: p.failed ? '' : formatChange(previous, p.records_per_s) }),
      );
      if (!p.failed) {
        previous = p.records_per_s;
      }
      return row;
    });
    this.table.append(
      el(
        'table',
        { class: 'data' },
        el('thead', {}, el('tr', {}, ...['run', 'date', 'note', 'tern', 'records/s', 'vs previous'].map((h) => el('th', { text: h })))),
        el('tbody', {}, rows),
      ),
    );
  }
}
