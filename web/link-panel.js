// link-panel.js: one link of a run. On the left, records/s against records
// per message on log scales, one line per layer and mode; on the right, each
// result's share of the link's bandwidth as bars, with the 100% line dotted
// (MB/s instead when the link has no limit). Failed cells are listed, not
// charted, since their figures are not a success.

import { el, clear, formatBandwidth, formatPercent, formatRate, formatSize, text } from './dom.js';
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

function chartLibrary() {
  return typeof window.Chart === 'function' ? window.Chart : null;
}

export class LinkPanel {
  constructor(link, onPick) {
    this.link = link;
    this.onPick = onPick;
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

  setResults(results) {
    this.results = results;
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
      .map((series, index) => {
        const points = stream
          .filter((r) => r.layer === series.layer && r.mode === series.mode)
          .map((r) => ({ x: r.records_per_msg, y: r.records_per_s, result: r }))
          .filter((p) => p.x > 0 && p.y > 0)
          .sort((a, b) => a.x - b.x);
        return { label: series.key, data: points, layer: series.layer, mode: series.mode, ...seriesStyle(series, index), pointRadius: 4, borderWidth: 2 };
      })
      .filter((dataset) => dataset.data.length > 0 || dataset.layer === 'tern' || dataset.layer === 'tcp');
  }

  shareDatasets(sizes) {
    const stream = this.results.filter(chartable);
    const limited = this.limited();
    const datasets = seriesOf(this.results).map((series, index) => {
      const style = seriesStyle(series, index);
      const data = sizes.map((size) => {
        const r = stream.find((x) => x.layer === series.layer && x.mode === series.mode && x.records_per_msg === size);
        if (!r) {
          return null;
        }
        if (limited) {
          const share = typeof r.link_share === 'number' ? r.link_share : r.bytes_per_s / this.link.bandwidth_Bps;
          return share * 100;
        }
        return r.bytes_per_s / 1e6;
      });
      return { type: 'bar', label: series.key, data, backgroundColor: style.backgroundColor, borderColor: style.borderColor, borderWidth: 1 };
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
          y: { type: 'logarithmic', title: { display: true, text: 'records/s' }, ticks: { callback: logLabel } },
        },
        plugins: {
          legend: { position: 'bottom', labels: { usePointStyle: true } },
          tooltip: {
            callbacks: {
              label: (ctx) => `${ctx.dataset.label}: ${formatRate(ctx.parsed.y)} records/s at ${ctx.parsed.x} per message`,
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
      plugins: [fullWidthLine],
      data: { labels: sizes.map(String), datasets: share },
      options: {
        animation: false,
        maintainAspectRatio: false,
        scales: {
          x: { title: { display: true, text: 'records per message' } },
          y: { beginAtZero: true, suggestedMax: limited ? 110 : undefined, title: { display: true, text: limited ? 'share of link (%)' : 'MB/s' } },
        },
        plugins: {
          legend: { position: 'bottom' },
          tooltip: {
            callbacks: {
              label: (ctx) => `${ctx.dataset.label}: ${ctx.parsed.y === null ? '–' : ctx.parsed.y.toFixed(1)}${limited ? '%' : ' MB/s'}`,
            },
          },
        },
      },
    });
  }

  renderFailures() {
    clear(this.failures);
    for (const r of this.results.filter((x) => x.failed)) {
      const cell = `${r.scenario} ${r.layer} ${r.mode} ${r.records_per_msg} rec/msg`;
      this.failures.append(el('li', { class: 'failure', text: `failed: ${cell}: ${text(r.error || (r.lost ? `${r.lost} records lost` : 'no reason recorded'))}` }));
    }
  }

  // Scenarios other than stream (pingpong, bytes, fanin) as a small table.
  renderOthers() {
    clear(this.others);
    const rows = this.results.filter((r) => r.scenario !== 'stream' && !r.failed);
    if (rows.length === 0) {
      return;
    }
    const body = rows.map((r) =>
      el(
        'tr',
        {},
        el('td', { text: r.scenario }),
        el('td', { text: `${r.layer} ${r.mode}` }),
        el('td', { text: r.scenario === 'bytes' ? formatSize(r.payload_bytes) : `${r.records_per_msg} rec/msg` }),
        el('td', { text: r.concurrency > 1 ? `×${r.concurrency}` : '' }),
        el('td', { class: 'num', text: formatRate(r.records_per_s) }),
        el('td', { class: 'num', text: formatBandwidth(r.bytes_per_s) }),
        el('td', { class: 'num', text: typeof r.lat_p50_us === 'number' ? `${r.lat_p50_us.toFixed(0)} / ${text(r.lat_p99_us?.toFixed(0))} µs` : '' }),
      ),
    );
    this.others.append(
      el(
        'table',
        { class: 'data' },
        el('thead', {}, el('tr', {}, ...['scenario', 'layer mode', 'size', 'conc.', 'records/s', 'bytes/s', 'p50 / p99'].map((h) => el('th', { text: h })))),
        el('tbody', {}, body),
      ),
    );
  }

  renderTable() {
    clear(this.table);
    const rows = this.results
      .filter((r) => r.scenario === 'stream')
      .sort((a, b) => a.layer.localeCompare(b.layer) || a.mode.localeCompare(b.mode) || a.records_per_msg - b.records_per_msg)
      .map((r) =>
        el(
          'tr',
          { class: r.failed ? 'failed' : '' },
          el('td', { text: `${r.layer} ${r.mode}` }),
          el('td', { class: 'num', text: r.records_per_msg }),
          el('td', { class: 'num', text: r.failed ? 'failed' : formatRate(r.records_per_s) }),
          el('td', { class: 'num', text: formatBandwidth(r.bytes_per_s) }),
          el('td', { class: 'num', text: this.limited() ? formatPercent(r.link_share) : '–' }),
          el('td', { class: 'num', text: typeof r.cpu_s_per_gb === 'number' ? r.cpu_s_per_gb.toFixed(2) : '–' }),
        ),
      );
    this.table.append(
      el(
        'table',
        { class: 'data' },
        el('thead', {}, el('tr', {}, ...['layer mode', 'rec/msg', 'records/s', 'bytes/s', 'share', 'CPU s/GB'].map((h) => el('th', { text: h })))),
        el('tbody', {}, rows),
      ),
    );
  }
}
