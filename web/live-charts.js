// live-charts.js: one key over the last minutes, in two Chart.js charts: its
// rate (messages/s) at each node that publishes it (solid) or receives it
// (dashed), and the publish-to-delivery latency percentiles (p50, p99,
// p99.9) at each node that receives it. The x axis is the dashboard's clock;
// a point is a report.

import { el, formatRate } from './dom.js';
import { formatMicros } from './live-graph.js';

const COLORS = ['#1f6fd1', '#e07b00', '#2a9d55', '#8e44ad', '#b03a2e', '#5d6d7e', '#d4a017', '#17a2b8'];
const PERCENTILES = [
  ['p50', 3, []],
  ['p99', 4, [6, 4]],
  ['p99.9', 5, [2, 3]],
];

export function clock(ms) {
  const d = new Date(ms);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((v) => String(v).padStart(2, '0')).join(':');
}

// Latency ticks at 1, 2 and 5 times a power of ten, so the log axis stays readable.
function latencyTick(value) {
  const mantissa = value / 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5].some((m) => Math.abs(mantissa - m) < 1e-6) ? String(value) : '';
}

// Ticks on whole seconds, about four across the window.
const STEPS_S = [1, 2, 5, 10, 15, 30, 60, 120, 300];

function timeAxis(windowMs, now) {
  const step = STEPS_S.find((s) => s * 1000 >= windowMs / 4) ?? STEPS_S[STEPS_S.length - 1];
  return {
    type: 'linear',
    min: now - windowMs,
    max: now,
    title: { display: true, text: 'time (dashboard clock, hh:mm:ss)' },
    ticks: { callback: (v) => clock(v), stepSize: step * 1000, includeBounds: false, maxRotation: 0 },
  };
}

export function seriesLabel(series, all) {
  const publishers = new Set(all.filter((s) => s.node === series.node && s.role === series.role).map((s) => s.publisher));
  return `${series.node} ${series.role}${publishers.size > 1 ? ` (${series.publisher})` : ''}`;
}

export class LiveCharts {
  constructor(container) {
    this.rateCanvas = el('canvas', { class: 'live-rate-chart', role: 'img', 'aria-label': 'messages per second over time' });
    this.latencyCanvas = el('canvas', { class: 'live-latency-chart', role: 'img', 'aria-label': 'latency percentiles over time' });
    this.latencyNote = el('p', { class: 'muted small', text: '' });
    container.append(
      el('div', { class: 'charts' },
        el('div', { class: 'chart-box' }, el('div', { class: 'caption muted', text: 'rate: messages/s at each node, one point a report' }), el('div', { class: 'canvas-box' }, this.rateCanvas)),
        el('div', { class: 'chart-box' }, el('div', { class: 'caption muted', text: 'publish-to-delivery latency at each receiving node (solid p50, dashed p99, dotted p99.9)' }), el('div', { class: 'canvas-box' }, this.latencyCanvas), this.latencyNote)),
    );
    this.rateChart = null;
    this.latencyChart = null;
  }

  // series: [{node, key, role, publisher, points: [[t_ms, msgs, bytes, p50, p99, p999], ...]}] of one key.
  render(series, windowMs, now) {
    const Chart = typeof window.Chart === 'function' ? window.Chart : null;
    if (!Chart) {
      return;
    }
    const color = (i) => COLORS[i % COLORS.length];
    const rate = series.map((s, i) => ({
      label: seriesLabel(s, series),
      data: s.points.map((p) => ({ x: p[0], y: p[1] })),
      borderColor: color(i),
      backgroundColor: color(i),
      borderDash: s.role === 'pub' ? [] : [6, 3],
      pointRadius: 0,
      borderWidth: 2,
      node: s.node,
      role: s.role,
    }));
    const receivers = series.map((s, i) => ({ s, i })).filter(({ s }) => s.role === 'sub');
    const latency = receivers.flatMap(({ s, i }) =>
      PERCENTILES.map(([name, column, dash]) => ({
        label: `${seriesLabel(s, series)} ${name}`,
        data: s.points.filter((p) => p[column] !== null).map((p) => ({ x: p[0], y: p[column] })),
        borderColor: color(i),
        backgroundColor: color(i),
        borderDash: dash,
        pointRadius: 0,
        borderWidth: name === 'p50' ? 2 : 1.5,
      })),
    );
    this.latencyNote.textContent = receivers.length === 0 ? 'No node receives this key: no latency to show.' : '';
    if (this.rateChart) {
      this.rateChart.data.datasets = rate;
      this.rateChart.options.scales.x = timeAxis(windowMs, now);
      this.rateChart.update('none');
      this.latencyChart.data.datasets = latency;
      this.latencyChart.options.scales.x = timeAxis(windowMs, now);
      this.latencyChart.update('none');
      return;
    }
    const common = (yTitle, y, format) => ({
      animation: false,
      maintainAspectRatio: false,
      parsing: true,
      interaction: { mode: 'nearest', axis: 'x', intersect: false },
      scales: {
        x: timeAxis(windowMs, now),
        y: { ...y, title: { display: true, text: yTitle } },
      },
      plugins: {
        legend: { position: 'bottom' },
        tooltip: { callbacks: { title: (items) => (items.length ? clock(items[0].parsed.x) : ''), label: (ctx) => `${ctx.dataset.label}: ${format(ctx.parsed.y)}` } },
      },
    });
    this.rateChart = new Chart(this.rateCanvas, { type: 'line', data: { datasets: rate }, options: common('messages/s', { beginAtZero: true, ticks: { callback: (v) => formatRate(v) } }, (v) => `${formatRate(v)} messages/s`) });
    this.latencyChart = new Chart(this.latencyCanvas, { type: 'line', data: { datasets: latency }, options: common('latency (µs, log scale)', { type: 'logarithmic', ticks: { callback: latencyTick } }, formatMicros) });
  }
}
