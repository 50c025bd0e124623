// runs-list.js: the list of runs, newest first, one row per run.

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

export class RunsList {
  constructor(container, onSelect) {
    this.container = container;
    this.onSelect = onSelect;
  }

  render(runs, selectedId) {
    clear(this.container);
    if (runs.length === 0) {
      this.container.append(el('p', { class: 'muted', text: 'No runs yet.' }));
      return;
    }
    const body = el('tbody');
    for (const run of runs) {
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
    this.container.append(
      el(
        'table',
        { class: 'runs-table' },
        el('thead', {}, el('tr', {}, el('th', { text: 'run' }), el('th', { text: 'date, note, host, version' }), el('th', { text: 'status' }))),
        body,
      ),
    );
  }
}
