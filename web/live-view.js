// live-view.js: the Live view, for a dashboard started with --connect: the
// watched network as a graph (live-graph.js), a chosen key's rate and
// latency over the last minutes (live-charts.js), and a table of every key
// at every node. The server sends the last minutes on connect
// ("live_history") and the current state each second ("live"); a key's
// point is added when its report is newer than the last one drawn.
// Without --connect no such message comes, and the view says how to turn
// it on.

import { el, clear, formatRate, text } from './dom.js';
import { LiveGraph, formatMicros } from './live-graph.js';
import { LiveCharts, clock, seriesLabel } from './live-charts.js';

// The charts span the points there are, between these bounds.
const MIN_WINDOW_MS = 10 * 1000;

// A rate or size, "0" for nothing.
function amount(value) {
  return value === 0 ? '0' : formatRate(value);
}

// 64000 -> "64.0 kB/s", 512 -> "512 B/s"
function bytes(value, unit) {
  return Math.abs(value) >= 1000 ? `${formatRate(value)}${unit}` : `${amount(value)} ${unit}`;
}

function seriesId(s) {
  return JSON.stringify([s.node, s.key, s.role, s.publisher]);
}

export class LiveView {
  constructor(container) {
    this.container = container;
    this.series = new Map();
    this.capacity = 300;
    this.last = null;
    this.key = null;
    this.title = el('h2', { text: 'Live' });
    this.notice = el('div', { class: 'live-off' },
      el('p', { text: 'The Live view shows a running tern network: its nodes and connections, and each key\'s rate and latency over the last minutes, updated each second.' }),
      el('p', {}, 'Start the dashboard with ', el('code', { text: 'tern dashboard --connect tcp://HOST:PORT' }), ' (a router of the network; the default node listens on tcp://127.0.0.1:7447) to see it here.'),
    );
    this.status = el('p', { class: 'muted live-status' });
    this.graphBox = el('div', { class: 'live-graph-box' });
    this.graph = new LiveGraph(this.graphBox);
    this.legend = el('p', { class: 'muted small', text: 'Large filled circles marked R are routers; dashed circles send no telemetry (this dashboard among them). Lines are connections, labelled with their round trip.' });
    this.picker = el('select', { name: 'key', 'aria-label': 'key', onchange: () => this.pick(this.picker.value) });
    this.chartTitle = el('h3', { text: '' });
    this.chartsBox = el('div', { class: 'live-charts' });
    this.charts = new LiveCharts(this.chartsBox);
    this.table = el('div', { class: 'live-table' });
    this.body = el('div', { class: 'live-on', hidden: true },
      this.status,
      this.graphBox,
      this.legend,
      el('form', { class: 'picker', onsubmit: (event) => event.preventDefault() }, el('label', {}, 'key', this.picker)),
      this.chartTitle,
      this.chartsBox,
      this.table,
    );
    container.append(this.title, this.notice, this.body);
  }

  get enabled() {
    return this.last !== null;
  }

  // {"type": "live_history"}: every series' last minutes, replacing what was drawn.
  onHistory(msg) {
    this.capacity = msg.capacity || this.capacity;
    this.series.clear();
    for (const s of msg.series || []) {
      this.series.set(seriesId(s), { node: s.node, key: s.key, role: s.role, publisher: s.publisher, points: s.points.slice(), latest: null });
    }
  }

  // {"type": "live"}: the network now; a new point for each series whose report is new.
  onLive(msg) {
    this.last = msg;
    const seen = new Set();
    for (const k of msg.keys || []) {
      const id = seriesId(k);
      seen.add(id);
      let s = this.series.get(id);
      if (!s) {
        s = { node: k.node, key: k.key, role: k.role, publisher: k.publisher, points: [] };
        this.series.set(id, s);
      }
      s.latest = k;
      const lastPoint = s.points[s.points.length - 1];
      if (!lastPoint || k.t_ms > lastPoint[0]) {
        s.points.push([k.t_ms, k.msgs_per_s, k.bytes_per_s, k.lat_p50_us ?? null, k.lat_p99_us ?? null, k.lat_p999_us ?? null]);
        if (s.points.length > this.capacity) {
          s.points.splice(0, s.points.length - this.capacity);
        }
      }
    }
    // What the server forgot (a node or key gone silent) goes from the page too.
    for (const id of [...this.series.keys()]) {
      if (!seen.has(id)) {
        this.series.delete(id);
      }
    }
    this.render();
  }

  pick(key) {
    this.key = key;
    this.renderCharts();
  }

  render() {
    const msg = this.last;
    this.notice.hidden = true;
    this.body.hidden = false;
    const reporting = msg.nodes.filter((n) => n.reporting).length;
    const keys = new Set([...this.series.values()].map((s) => s.key));
    this.status.textContent = `Watching ${msg.connect.join(', ')} as ${msg.observer}: ${reporting} node${reporting === 1 ? '' : 's'} reporting, ${msg.links.length} link${msg.links.length === 1 ? '' : 's'}, ${keys.size} key${keys.size === 1 ? '' : 's'}. Updated ${clock(msg.time_ms)}.`;
    this.graph.render(msg.nodes, msg.links);
    this.renderPicker([...keys].sort());
    this.renderCharts();
    this.renderTable();
  }

  renderPicker(keys) {
    if (!keys.includes(this.key)) {
      this.key = keys[0] ?? null;
    }
    const current = [...this.picker.options].map((o) => o.value);
    if (JSON.stringify(current) !== JSON.stringify(keys)) {
      clear(this.picker);
      for (const key of keys) {
        this.picker.append(el('option', { value: key, text: key }));
      }
    }
    if (this.key !== null) {
      this.picker.value = this.key;
    }
  }

  renderCharts() {
    const series = [...this.series.values()].filter((s) => s.key === this.key).sort((a, b) => seriesLabel(a, []).localeCompare(seriesLabel(b, [])));
    this.container.dataset.key = this.key ?? '';
    if (this.key === null) {
      this.chartTitle.textContent = 'No key is published yet.';
      this.chartsBox.hidden = true;
      return;
    }
    this.chartTitle.textContent = `Key ${this.key}`;
    this.chartsBox.hidden = false;
    const now = this.last ? this.last.time_ms : Date.now();
    const oldest = Math.min(...series.map((s) => (s.points.length ? s.points[0][0] : now)));
    const windowMs = Math.max(MIN_WINDOW_MS, Math.min(this.capacity * 1000, now - oldest));
    this.charts.render(series, windowMs, now);
  }

  renderTable() {
    const rows = [...this.series.values()]
      .filter((s) => s.latest)
      .sort((a, b) => a.key.localeCompare(b.key) || a.node.localeCompare(b.node) || a.role.localeCompare(b.role));
    const head = ['key', 'node', 'role', 'publisher', 'messages/s', 'bytes/s', 'total', 'drops / missed', 'blocked (ms)', 'queued', 'p50', 'p99', 'p99.9'];
    const table = el('table', { class: 'data live-keys' },
      el('thead', {}, el('tr', {}, head.map((h) => el('th', { text: h })))),
      el('tbody', {}, rows.map((s) => {
        const k = s.latest;
        const pub = s.role === 'pub';
        return el('tr', { dataset: { key: s.key, node: s.node, role: s.role } },
          el('td', { text: s.key }),
          el('td', { text: s.node }),
          el('td', { text: s.role }),
          el('td', { text: text(s.publisher) }),
          el('td', { class: 'num', text: amount(k.msgs_per_s) }),
          el('td', { class: 'num', text: bytes(k.bytes_per_s, 'B/s') }),
          el('td', { class: 'num', text: amount(k.msgs_total) }),
          el('td', { class: 'num', text: pub ? text(k.drops) : text(k.missed) }),
          el('td', { class: 'num', text: pub ? text(k.blocked_ms) : '' }),
          el('td', { class: 'num', text: pub ? bytes(k.queue_bytes, 'B') : '' }),
          el('td', { class: 'num', text: pub ? '' : formatMicros(k.lat_p50_us) }),
          el('td', { class: 'num', text: pub ? '' : formatMicros(k.lat_p99_us) }),
          el('td', { class: 'num', text: pub ? '' : formatMicros(k.lat_p999_us) }),
        );
      })),
    );
    clear(this.table);
    this.table.append(table);
  }
}
