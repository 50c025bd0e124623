// run-view.js: the selected run: its description, its environment, the
// tern/tcp matrix (ratio-view.js), and one panel per link. Results arrive either all at once (a "run" reply) or one by
// one (pushes while the bench runs); both go through addResults, which keeps
// one copy of each result id (a repeat is a row of its own) and redraws only
// the panels whose link changed; a panel reduces the repeats of a cell.

import { el, clear, formatDate, text } from './dom.js';
import { LinkPanel } from './link-panel.js';
import { RatioView } from './ratio-view.js';
import { runStatus } from './runs-list.js';

export class RunView {
  constructor(container, onPick) {
    this.container = container;
    this.onPick = onPick;
    this.runId = null;
    this.run = null;
    this.links = new Map();
    this.results = new Map();
    this.panels = new Map();
    this.header = el('div', { class: 'run-header' });
    this.panelBox = el('div', { class: 'panels' });
    this.ratio = new RatioView(onPick);
    this.message = el('p', { class: 'muted' });
  }

  reset() {
    for (const panel of this.panels.values()) {
      panel.destroy();
    }
    this.panels.clear();
    this.links.clear();
    this.results.clear();
    this.run = null;
    clear(this.ratio.el);
    clear(this.container);
  }

  showMessage(message) {
    this.reset();
    this.runId = null;
    this.message.textContent = message;
    this.container.append(this.message);
  }

  // Starts showing runId; its data follows through load() or addResults().
  select(runId) {
    if (this.runId === runId) {
      return;
    }
    this.reset();
    this.runId = runId;
    this.message.textContent = `Loading run #${runId}…`;
    this.container.append(this.header, this.message, this.ratio.el, this.panelBox);
  }

  load(msg) {
    if (msg.run_id !== this.runId) {
      return;
    }
    this.message.textContent = '';
    this.updateRun(msg.run);
    for (const link of msg.links || []) {
      this.links.set(link.name, link);
    }
    this.addResults(msg.results || []);
    if (this.results.size === 0) {
      this.message.textContent = msg.run.status === 'running' ? 'Waiting for the first result…' : 'This run has no results.';
    }
  }

  updateRun(update) {
    if (!update || update.id !== this.runId) {
      return;
    }
    // A pushed run_updated has the list's columns only: keep config and environment.
    const run = this.run && this.run.id === update.id ? { ...this.run, ...update } : update;
    this.run = run;
    clear(this.header);
    const status = runStatus(run);
    const config = run.config && typeof run.config === 'object' ? run.config : null;
    const repeats = config && config.repeat > 1 ? `, ${config.repeat} repeats a cell` : '';
    const build = [run.build_type, run.compiler].filter(Boolean).join(', ');
    this.header.append(
      el('h2', {}, `Run #${run.id} `, el('span', { class: `badge ${status.kind}`, text: status.label })),
      el('div', { class: 'run-note', text: text(run.note) }),
      el(
        'dl',
        { class: 'facts' },
        el('dt', { text: 'started' }),
        el('dd', { text: formatDate(run.started_at) }),
        el('dt', { text: 'finished' }),
        el('dd', { text: run.finished_at ? formatDate(run.finished_at) : '–' }),
        el('dt', { text: 'host' }),
        el('dd', { text: `${text(run.host)}${run.cores ? ` (${run.cores} cores)` : ''}` }),
        el('dt', { text: 'cpu' }),
        el('dd', { text: text(run.cpu_model || run.cpu) }),
        el('dt', { text: 'tern' }),
        el('dd', { class: 'commit', text: `${text(run.tern_version)}${run.tern_commit ? ` at ${run.tern_commit}` : ''}` }),
        el('dt', { text: 'results' }),
        el('dd', { text: `${run.results || 0}${run.failed_cells ? `, ${run.failed_cells} failed` : ''}${repeats}` }),
        el('dt', { text: 'build' }),
        el('dd', { class: 'build', text: text(build) }),
        el('dt', { text: 'kernel' }),
        el('dd', { class: 'kernel', text: text(run.kernel) }),
      ),
    );
    const env = run.env && typeof run.env === 'object' ? run.env : null;
    if (env) {
      // "governor performance · mem_total 4028024 kB · ...": one line, a table when opened.
      const line = Object.entries(env).map(([key, value]) => `${key} ${typeof value === 'object' ? JSON.stringify(value) : value}`).join(' · ');
      this.header.append(
        el(
          'details',
          { class: 'env' },
          el('summary', {}, 'environment ', el('span', { class: 'muted small', text: line })),
          el('table', { class: 'data' }, el('tbody', {}, Object.entries(env).map(([key, value]) => el('tr', {}, el('th', { text: key }), el('td', { text: typeof value === 'object' ? JSON.stringify(value) : String(value) }))))),
        ),
      );
    }
    if (config) {
      this.header.append(el('details', { class: 'config' }, el('summary', { text: 'configuration' }), el('pre', { text: JSON.stringify(config, null, 2) })));
    }
  }

  // A result pushed while the bench runs (with its link's row).
  addPushed(msg) {
    if (msg.run_id !== this.runId || !this.run) {
      return;
    }
    if (msg.link && !this.links.has(msg.link.name)) {
      this.links.set(msg.link.name, msg.link);
    }
    if (!this.results.has(msg.result.id) && msg.result.id > (this.run.last_result_id || 0)) {
      this.run.results = (this.run.results || 0) + 1;
      this.run.last_result_id = msg.result.id;
      if (msg.result.failed) {
        this.run.failed_cells = (this.run.failed_cells || 0) + 1;
      }
      this.updateRun(this.run);
    }
    this.addResults([msg.result]);
  }

  addResults(results) {
    const touched = new Set();
    for (const r of results) {
      this.results.set(r.id, r);
      touched.add(r.link);
    }
    if (touched.size > 0) {
      this.message.textContent = '';
    }
    for (const name of touched) {
      const link = this.links.get(name) || { name, bandwidth_Bps: null, rtt_ms: null };
      let panel = this.panels.get(name);
      if (!panel) {
        panel = new LinkPanel(link, this.onPick);
        this.panels.set(name, panel);
        this.placePanel(name, panel);
      } else {
        panel.setLink(link);
      }
      panel.setResults([...this.results.values()].filter((r) => r.link === name));
    }
    if (touched.size > 0) {
      this.ratio.render([...this.results.values()], this.links);
    }
  }

  // Panels in the order of the run's links table, unknown links last.
  placePanel(name, panel) {
    const order = [...this.links.keys()];
    const rank = (n) => {
      const i = order.indexOf(n);
      return i < 0 ? order.length : i;
    };
    const after = [...this.panels.keys()].filter((n) => n !== name && rank(n) > rank(name)).sort((a, b) => rank(a) - rank(b)).map((n) => this.panels.get(n).el);
    const next = after.find((node) => node.parentNode === this.panelBox);
    this.panelBox.insertBefore(panel.el, next || null);
  }

  // The cells of this run, for the trend and compare views.
  cells() {
    return [...this.results.values()].filter((r) => r.scenario === 'stream');
  }
}
