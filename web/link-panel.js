// link-panel.js: one link of a run. On the left, records/s against records
// per message on log scales, one line per layer and mode; on the right, each
// result's share of the link's bandwidth as bars, with the 100% line dotted
// (MB/s instead when the link has no limit). A cell measured several times
// (--repeat) is one point or bar at the median of its repeats, with a bar
// from their minimum to their maximum. Failed repeats are listed, not
// charted, since their figures are not a success.

import { el, clear, formatBandwidth, formatPercent, formatRate, formatSize, text } from './dom.js';
import { formatSpread, reduceCells } from './cells.js';
import { chartable, seriesOf, seriesStyle } from './series.js';

// Labels at 1, 2 and 5 times a power of ten, so a log axis stays readable;
// on a narrow range with fewer than two such ticks, every few ticks instead.
function isRound(value) {
  const mantissa = value / 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5].some((m) => Math.abs(mantissa - m) < 1e-6);
}

function logLabel(value, index, ticks) {
  if (ticks.filter((t) => isRound(t.value)).length >= 2) {
    return isRound(value) ? formatRate(value) : '';
  }
  const step = Math.max(1, Math.ceil(ticks.length / 4));
  return index % step === 0 || index === ticks.length - 1 ? formatRate(value) : '';
}

// Draws each dotted reference line (a line dataset of one value) from edge to
// edge of the plot, where a category axis would stop it at the first and last bar.
const fullWidthLine = {
  id: 'fullWidthLine',
  afterDatasetsDraw(chart) {
    const { ctx, chartArea, scales } = chart;
    chart.data.datasets.forEach((dataset, index) => {
      if (dataset.type !== 'line' || !dataset.borderDash?.length || !chart.isDatasetVisible(index) || dataset.data.length === 0) {
        return;
      }
      const y = scales.y.getPixelForValue(dataset.data[0]);
      ctx.save();
      ctx.strokeStyle = dataset.borderColor;
      ctx.lineWidth = dataset.borderWidth;
      ctx.setLineDash(dataset.borderDash);
      ctx.beginPath();
      ctx.moveTo(chartArea.left, y);
      ctx.lineTo(chartArea.right, y);
      ctx.stroke();
      ctx.restore();
    });
  },
};

// Draws the spread of each repeated cell: a vertical bar with caps from the
// minimum to the maximum of its repeats, from dataset.spread[i] ({min, max}
// beside dataset.data[i]; null for a cell measured once).
const spreadBars = {
  id: 'spreadBars',
  afterDatasetsDraw(chart) {
    const { ctx, chartArea } = chart;
    chart.data.datasets.forEach((dataset, index) => {
      if (!dataset.spread || !chart.isDatasetVisible(index)) {
        return;
      }
      const meta = chart.getDatasetMeta(index);
      dataset.spread.forEach((s, i) => {
        const element = meta.data[i];
        if (!s || !element || !(s.max > s.min)) {
          return;
        }
        const top = meta.yScale.getPixelForValue(s.max);
        const bottom = meta.yScale.getPixelForValue(s.min);
        ctx.save();
        ctx.beginPath();
        ctx.rect(chartArea.left, chartArea.top, chartArea.right - chartArea.left, chartArea.bottom - chartArea.top);
        ctx.clip();
        ctx.strokeStyle = dataset.borderColor;
        ctx.lineWidth = 1.5;
        ctx.setLineDash([]);
        ctx.beginPath();
        ctx.moveTo(element.x, top);
        ctx.lineTo(element.x, bottom);
        ctx.moveTo(element.x - 4, top);
        ctx.lineTo(element.x + 4, top);
        ctx.moveTo(element.x - 4, bottom);
        ctx.lineTo(element.x + 4, bottom);
        ctx.stroke();
        ctx.restore();
      });
    });
  },
};

// An axis's afterDataLimits: widen it to the spread bars, so none runs past the plot.
function fitSpread(scale) {
  scale.chart.data.datasets.forEach((dataset, index) => {
    if (!dataset.spread || !scale.chart.isDatasetVisible(index)) {
      return;
    }
    for (const s of dataset.spread) {
      if (s && (scale.type !== 'logarithmic' || s.min > 0)) {
        scale.min = Math.min(scale.min, s.min);
        scale.max = Math.max(scale.max, s.max);
      }
    }
  });
}

// " (2.90 M–3.01 M over 3 repeats)" for a tooltip, or nothing for one sample.
function spreadNote(range, format) {
  return range && range.n > 1 ? ` (${format(range.min)}–${format(range.max)} over ${range.n} repeats)` : '';
}

function chartLibrary() {
  return typeof window.Chart === 'function' ? window.Chart : null;
}

// "3", or "2 of 3" when a repeat failed.
function repeatsText(cell) {
  return cell.repeats.failed ? `${cell.repeats.ok} of ${cell.repeats.n}` : String(cell.repeats.n);
}

export class LinkPanel {
  constructor(link, onPick) {
    this.link = link;
    this.onPick = onPick;
    this.rows = [];
    this.results = [];
    this.rateChart = null;
    this.shareChart = null;
    this.title = el('h3', {});
    this.subtitle = el('span', { class: 'muted' });
    this.rateCanvas = el('canvas', { class: 'rate-chart', role: 'img', 'aria-label': `records per second on ${link.name}` });
    this.shareCanvas = el('canvas', { class: 'share-chart', role: 'img', 'aria-label': `share of the bandwidth of ${link.name}` });
    this.shareCaption = el('div', { class: 'caption muted' });
    this.failures = el('ul', { class: 'failures' });
    this.others = el('div', { class: 'others' });
    this.table = el('div', { class: 'values' });
    this.el = el(
      'article',
      { class: 'link-panel', dataset: { link: link.name } },
      el('header', {}, this.title, this.subtitle),
      el(
        'div',
        { class: 'charts' },
        el('div', { class: 'chart-box' }, el('div', { class: 'caption muted', text: 'records/s vs records per message (log–log); click a point for its trend' }), el('div', { class: 'canvas-box' }, this.rateCanvas)),
        el('div', { class: 'chart-box' }, this.shareCaption, el('div', { class: 'canvas-box' }, this.shareCanvas)),
      ),
      this.failures,
      this.others,
      el('details', {}, el('summary', { text: 'values' }), this.table),
    );
    this.setLink(link);
  }

  setLink(link) {
    this.link = link;
    this.title.textContent = link.name;
    const rtt = typeof link.rtt_ms === 'number' ? `${link.rtt_ms} ms RTT` : '';
    this.subtitle.textContent = ` ${formatBandwidth(link.bandwidth_Bps)}${rtt ? ', ' + rtt : ''}`;
  }

  limited() {
    return typeof this.link.bandwidth_Bps === 'number' && this.link.bandwidth_Bps > 0;
  }

  // rows: every result row of this link, repeats included.
  setResults(rows) {
    this.rows = rows;
    this.results = reduceCells(rows);
    this.renderCharts();
    this.renderFailures();
    this.renderOthers();
    this.renderTable();
  }

  destroy() {
    this.rateChart?.destroy();
    this.shareChart?.destroy();
    this.el.remove();
  }

  rateDatasets() {
    const stream = this.results.filter(chartable);
    return seriesOf(this.results)
      .map((series) => {
        const points = stream
          .filter((r) => r.layer === series.layer && r.mode === series.mode)
          .map((r) => ({ x: r.records_per_msg, y: r.records_per_s, result: r }))
          .filter((p) => p.x > 0 && p.y > 0)
          .sort((a, b) => a.x - b.x);
        const spread = points.map((p) => p.result.range.records_per_s ?? null);
        return { label: series.key, data: points, spread, layer: series.layer, mode: series.mode, ...seriesStyle(series), pointRadius: 4, borderWidth: 2 };
      })
      .filter((dataset) => dataset.data.length > 0 || dataset.layer === 'tern' || dataset.layer === 'tcp');
  }

  shareDatasets(sizes) {
    const stream = this.results.filter(chartable);
    const limited = this.limited();
    // The bar's height and spread: share of the link in %, or MB/s.
    const figure = (r) => {
      if (!limited) {
        const s = r.range.bytes_per_s;
        return { value: r.bytes_per_s / 1e6, spread: s ? { min: s.min / 1e6, max: s.max / 1e6, n: s.n } : null };
      }
      if (typeof r.link_share === 'number') {
        const s = r.range.link_share;
        return { value: r.link_share * 100, spread: s ? { min: s.min * 100, max: s.max * 100, n: s.n } : null };
      }
      const s = r.range.bytes_per_s;
      const bw = this.link.bandwidth_Bps;
      return { value: (r.bytes_per_s / bw) * 100, spread: s ? { min: (s.min / bw) * 100, max: (s.max / bw) * 100, n: s.n } : null };
    };
    const datasets = seriesOf(this.results).map((series) => {
      const style = seriesStyle(series);
      const bars = sizes.map((size) => {
        const r = stream.find((x) => x.layer === series.layer && x.mode === series.mode && x.records_per_msg === size);
        return r ? figure(r) : { value: null, spread: null };
      });
      return { type: 'bar', label: series.key, data: bars.map((b) => b.value), spread: bars.map((b) => b.spread), backgroundColor: style.backgroundColor, borderColor: style.borderColor, borderWidth: 1 };
    });
    if (limited) {
      // Drawn across the whole plot by fullWidthLine; the dataset gives it a legend entry.
      datasets.push({
        type: 'line',
        label: 'link bandwidth (100%)',
        data: sizes.map(() => 100),
        borderColor: '#555',
        borderDash: [2, 3],
        borderWidth: 1.5,
        pointRadius: 0,
        showLine: false,
        fill: false,
      });
    }
    return datasets;
  }

  renderCharts() {
    const Chart = chartLibrary();
    if (!Chart) {
      return;
    }
    const sizes = [...new Set(this.results.filter(chartable).map((r) => r.records_per_msg))].sort((a, b) => a - b);
    const limited = this.limited();
    this.shareCaption.textContent = limited
      ? 'share of the link bandwidth per records per message (dotted: 100%)'
      : 'MB/s per records per message (this link has no bandwidth limit)';
    const rate = this.rateDatasets();
    const share = this.shareDatasets(sizes);
    if (this.rateChart) {
      this.rateChart.data.datasets = rate;
      this.rateChart.update('none');
      this.shareChart.data.labels = sizes.map(String);
      this.shareChart.data.datasets = share;
      this.shareChart.options.scales.y.title.text = limited ? 'share of link (%)' : 'MB/s';
      this.shareChart.update('none');
      return;
    }
    this.rateChart = new Chart(this.rateCanvas, {
      type: 'line',
      plugins: [spreadBars],
      data: { datasets: rate },
      options: {
        animation: false,
        maintainAspectRatio: false,
        parsing: true,
        interaction: { mode: 'nearest', intersect: true },
        scales: {
          x: {
            type: 'logarithmic',
            title: { display: true, text: 'records per message' },
            // Ticks at the measured sizes, not at Chart.js's decimal steps.
            afterBuildTicks: (axis) => {
              const sizes = [...new Set(this.results.filter(chartable).map((r) => r.records_per_msg))].filter((v) => v > 0);
              if (sizes.length > 0) {
                axis.ticks = sizes.sort((a, b) => a - b).map((value) => ({ value }));
              }
            },
            ticks: { callback: (v) => String(v) },
          },
          y: { type: 'logarithmic', title: { display: true, text: 'records/s' }, ticks: { callback: logLabel }, afterDataLimits: fitSpread },
        },
        plugins: {
          legend: { position: 'bottom', labels: { usePointStyle: true } },
          tooltip: {
            callbacks: {
              label: (ctx) => `${ctx.dataset.label}: ${formatRate(ctx.parsed.y)} records/s${spreadNote(ctx.dataset.spread[ctx.dataIndex], formatRate)} at ${ctx.parsed.x} per message`,
            },
          },
        },
        onClick: (event, elements, chart) => {
          if (elements.length === 0 || !this.onPick) {
            return;
          }
          const point = chart.data.datasets[elements[0].datasetIndex].data[elements[0].index];
          this.onPick(point.result);
        },
      },
    });
    this.shareChart = new Chart(this.shareCanvas, {
      type: 'bar',
      plugins: [fullWidthLine, spreadBars],
      data: { labels: sizes.map(String), datasets: share },
      options: {
        animation: false,
        maintainAspectRatio: false,
        scales: {
          x: { title: { display: true, text: 'records per message' } },
          y: { beginAtZero: true, suggestedMax: limited ? 110 : undefined, title: { display: true, text: limited ? 'share of link (%)' : 'MB/s' }, afterDataLimits: fitSpread },
        },
        plugins: {
          legend: { position: 'bottom' },
          tooltip: {
            callbacks: {
              label: (ctx) => {
                const unit = this.limited() ? '%' : ' MB/s';
                const format = (v) => `${v.toFixed(1)}${unit}`;
                return `${ctx.dataset.label}: ${ctx.parsed.y === null ? '–' : format(ctx.parsed.y)}${spreadNote(ctx.dataset.spread?.[ctx.dataIndex], format)}`;
              },
            },
          },
        },
      },
    });
  }

  // Every failed repeat, with its reason.
  renderFailures() {
    clear(this.failures);
    for (const cell of this.results) {
      for (const r of cell.rows.filter((x) => x.failed)) {
        const which = cell.repeats.n > 1 ? ` (repeat ${(r.repeat ?? 0) + 1} of ${cell.repeats.n})` : '';
        const name = `${r.scenario} ${r.layer} ${r.mode} ${r.records_per_msg} rec/msg${which}`;
        this.failures.append(el('li', { class: 'failure', text: `failed: ${name}: ${text(r.error || (r.lost ? `${r.lost} records lost` : 'no reason recorded'))}` }));
      }
    }
  }

  // Scenarios other than stream (pingpong, bytes, fanin), and open-loop
  // stream cells with their latency, as a small table.
  renderOthers() {
    clear(this.others);
    const cells = this.results.filter((r) => (r.scenario !== 'stream' || r.rate > 0 || r.keys > 1) && !r.failed);
    if (cells.length === 0) {
      return;
    }
    const size = (r) => (r.scenario === 'bytes' ? formatSize(r.payload_bytes) : `${r.records_per_msg} rec/msg${r.keys > 1 ? ` over ${r.keys} keys` : ''}${r.rate > 0 ? ` @ ${formatRate(r.rate)}/s` : ''}`);
    const micros = (v) => (typeof v === 'number' ? v.toFixed(0) : '–');
    const body = cells.map((r) =>
      el(
        'tr',
        {},
        el('td', { text: r.scenario }),
        el('td', { text: `${r.layer} ${r.mode}` }),
        el('td', { text: size(r) }),
        el('td', { text: r.concurrency > 1 ? `×${r.concurrency}` : '' }),
        el('td', { class: 'num', text: formatSpread(r, 'records_per_s', formatRate) }),
        el('td', { class: 'num', text: formatBandwidth(r.bytes_per_s) }),
        el('td', { class: 'num', text: typeof r.lat_p50_us === 'number' ? `${micros(r.lat_p50_us)} / ${formatSpread(r, 'lat_p99_us', micros)} µs` : '' }),
        el('td', { class: 'num', text: repeatsText(r) }),
      ),
    );
    this.others.append(
      el(
        'table',
        { class: 'data' },
        el('thead', {}, el('tr', {}, ...['scenario', 'layer mode', 'size', 'conc.', 'records/s', 'bytes/s', 'p50 / p99', 'repeats'].map((h) => el('th', { text: h })))),
        el('tbody', {}, body),
      ),
    );
  }

  // Every closed-loop stream cell: the median of its repeats and, when it
  // has several, their range: "2.95 M (2.90 M–3.01 M)".
  renderTable() {
    clear(this.table);
    const rows = this.results
      .filter((r) => r.scenario === 'stream' && !(r.rate > 0) && !(r.keys > 1))
      .sort((a, b) => a.layer.localeCompare(b.layer) || a.mode.localeCompare(b.mode) || a.records_per_msg - b.records_per_msg)
      .map((r) =>
        el(
          'tr',
          { class: r.failed ? 'failed' : '' },
          el('td', { text: `${r.layer} ${r.mode}` }),
          el('td', { class: 'num', text: r.records_per_msg }),
          el('td', { class: 'num', text: r.failed ? 'failed' : formatSpread(r, 'records_per_s', formatRate) }),
          el('td', { class: 'num', text: formatBandwidth(r.bytes_per_s) }),
          el('td', { class: 'num', text: this.limited() ? formatPercent(r.link_share) : '–' }),
          el('td', { class: 'num', text: typeof r.cpu_s_per_gb === 'number' ? r.cpu_s_per_gb.toFixed(2) : '–' }),
          el('td', { class: 'num', text: repeatsText(r) }),
        ),
      );
    this.table.append(
      el(
        'table',
        { class: 'data' },
        el('thead', {}, el('tr', {}, ...['layer mode', 'rec/msg', 'records/s: median (min–max)', 'bytes/s', 'share', 'CPU s/GB', 'repeats'].map((h) => el('th', { text: h })))),
        el('tbody', {}, rows),
      ),
    );
  }
}
