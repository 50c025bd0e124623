// runs-list.js: the list of runs, newest first, one row per run, filtered by
// host and by a piece of the note (runs of many machines share a database
// once `tern bench import` brings them together).

import { el, clear, formatDate, text } from './dom.js';

export function runStatus(run) {
  const failed = run.failed_cells || 0;
  if (run.status === 'running') {
    return { label: failed > 0 ? `running, ${failed} failed` : 'running', kind: 'running' };
  }
  if (run.status === 'interrupted') {
    return { label: 'interrupted', kind: 'interrupted' };
  }
  if (run.status === 'failed' || failed > 0) {
    return { label: `${failed} failed cell${failed === 1 ? '' : 's'}`, kind: 'failed' };
  }
  if (run.status === 'finished' || run.finished_at) {
    return { label: 'finished', kind: 'finished' };
  }
  return { label: text(run.status), kind: 'unknown' };
}

// The runs that pass the filter: host equal (or any host), note containing the text (any case).
export function filterRuns(runs, filter) {
  const note = (filter.note || '').trim().toLowerCase();
  return runs.filter((run) => (!filter.host || run.host === filter.host) && (!note || String(run.note ?? '').toLowerCase().includes(note)));
}

export class RunsList {
  constructor(container, onSelect) {
    this.container = container;
    this.onSelect = onSelect;
    this.runs = [];
    this.selectedId = null;
    this.host = el('select', { name: 'host', 'aria-label': 'host', onchange: () => this.redraw() });
    this.note = el('input', { name: 'note', type: 'search', placeholder: 'note contains…', 'aria-label': 'note contains', oninput: () => this.redraw() });
    this.filters = el('div', { class: 'run-filters' }, el('label', {}, 'host', this.host), el('label', {}, 'note', this.note));
    this.table = el('div');
    container.append(this.filters, this.table);
  }

  filter() {
    return { host: this.host.value, note: this.note.value };
  }

  redraw() {
    this.render(this.runs, this.selectedId);
  }

  // Fills the host picker with the hosts of the runs, keeping the choice.
  renderHosts(runs) {
    const hosts = [...new Set(runs.map((r) => r.host).filter((h) => typeof h === 'string' && h !== ''))].sort();
    const keep = this.host.value;
    clear(this.host);
    this.host.append(el('option', { value: '', text: `all hosts (${hosts.length})` }));
    for (const host of hosts) {
      this.host.append(el('option', { value: host, text: host }));
    }
    this.host.value = hosts.includes(keep) ? keep : '';
  }

  render(runs, selectedId) {
    this.runs = runs;
    this.selectedId = selectedId;
    this.renderHosts(runs);
    clear(this.table);
    if (runs.length === 0) {
      this.table.append(el('p', { class: 'muted', text: 'No runs yet.' }));
      return;
    }
    const shown = filterRuns(runs, this.filter());
    if (shown.length === 0) {
      this.table.append(el('p', { class: 'muted', text: `No run matches (${runs.length} in all).` }));
      return;
    }
    const body = el('tbody');
    for (const run of shown) {
      const status = runStatus(run);
      const row = el(
        'tr',
        {
          class: run.id === selectedId ? 'run selected' : 'run',
          tabindex: 0,
          dataset: { runId: String(run.id) },
          'aria-selected': run.id === selectedId ? 'true' : 'false',
          onclick: () => this.onSelect(run.id),
          onkeydown: (event) => {
            if (event.key === 'Enter' || event.key === ' ') {
              event.preventDefault();
              this.onSelect(run.id);
            }
          },
        },
        el('td', { class: 'run-id', text: `#${run.id}` }),
        el(
          'td',
          {},
          el('div', { class: 'run-date', text: formatDate(run.started_at) }),
          el('div', { class: 'run-note', text: text(run.note) }),
          el('div', { class: 'run-meta muted', text: `${text(run.host)} · tern ${text(run.tern_version)}` }),
        ),
        el(
          'td',
          {},
          el('span', { class: `badge ${status.kind}`, text: status.label }),
          el('div', { class: 'muted small', text: `${run.results || 0} results` }),
        ),
      );
      body.append(row);
    }
    if (shown.length < runs.length) {
      this.table.append(el('p', { class: 'muted small filtered', text: `${shown.length} of ${runs.length} runs` }));
    }
    this.table.append(
      el(
        'table',
        { class: 'runs-table' },
        el('thead', {}, el('tr', {}, el('th', { text: 'run' }), el('th', { text: 'date, note, host, version' }), el('th', { text: 'status' }))),
        body,
      ),
    );
  }
}
