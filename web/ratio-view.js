// ratio-view.js: the answer at a glance, at the top of a run: how close tern
// comes to plain TCP on each link. One matrix per scenario, links down and
// records per message (or message size, or connections) across; each cell
// holds tern/tcp for each mode (batched, low latency), the median of tern's
// repeats over the median of tcp's, on one diverging colour scale centred at
// 1.0 (blue above, red below, white at parity, full colour at 2× and 0.5×).
// Beside it, tern's share of the link where the link has a bandwidth, and
// zmq/tcp when the run measured zmq. A stream cell opens its trend. A run
// with `tern bench --keys` gets a matrix by number of keys too: the stream
// cells over many keys beside the one-key cells of the same size.

import { el, clear, formatPercent, formatRate, formatSize } from './dom.js';
import { reduceCells } from './cells.js';

const MODES = [
  ['batched', 'batched'],
  ['lowlat', 'low latency'],
];
const SCENARIOS = ['stream', 'keys', 'bytes', 'pingpong', 'fanin'];
// The full colour of each side, reached at 2× and 0.5×.
const ABOVE = [31, 111, 209];
const BELOW = [192, 57, 43];

// The figure a scenario is judged by (bench/compare.c's metric).
export function metricOf(cell) {
  return cell.scenario === 'bytes' ? 'bytes_per_s' : 'records_per_s';
}

// Which matrix a cell belongs in: a stream over several keys goes to 'keys'.
function matrixOf(c) {
  return c.scenario === 'stream' && c.keys > 1 ? 'keys' : c.scenario;
}

// What a column of a matrix is, and its heading.
function columnOf(c, matrix = matrixOf(c)) {
  if (matrix === 'keys') {
    const keys = c.keys ?? 1;
    return { key: keys * 1e7 + c.records_per_msg, label: `${keys} key${keys === 1 ? '' : 's'}, ${c.records_per_msg} rec/msg` };
  }
  switch (c.scenario) {
    case 'bytes':
      return { key: c.payload_bytes, label: formatSize(c.payload_bytes) };
    case 'pingpong':
      return { key: c.concurrency, label: `${c.concurrency} in flight` };
    case 'fanin':
      return { key: c.concurrency * 1e9 + (c.batch_bytes || 0), label: `${c.concurrency} conns${c.batch_bytes ? ` ${formatSize(c.batch_bytes)}` : ''}` };
    default:
      return { key: c.records_per_msg, label: String(c.records_per_msg) };
  }
}

const AXIS = { stream: 'records per message', keys: 'keys (and records per message)', bytes: 'message size', pingpong: 'requests in flight', fanin: 'connections' };

// What pairs a tern cell with its tcp cell: the cell without its layer.
function pairKey(c) {
  return [c.scenario, c.link, c.mode, c.records_per_msg, c.payload_bytes, c.concurrency ?? 1, c.batch_bytes ?? '', c.keys ?? ''].join('|');
}

// Every ratio of a run's rows: [{scenario, link, mode, column, layer, ratio, cell, base}],
// for each layer other than tcp that has a tcp cell to divide by; scenario is
// the matrix ('keys' for a stream over several keys, whose one-key cells of
// the same size show there as well). Open-loop cells (--rate) and failed
// cells have no ratio.
export function ratios(rows) {
  const cells = reduceCells(rows).filter((c) => !c.failed && !(c.rate > 0) && SCENARIOS.includes(c.scenario));
  const keyed = new Set(cells.filter((c) => matrixOf(c) === 'keys').map((c) => c.records_per_msg));
  const tcp = new Map(cells.filter((c) => c.layer === 'tcp').map((c) => [pairKey(c), c]));
  const out = [];
  for (const c of cells) {
    const base = c.layer === 'tcp' ? null : tcp.get(pairKey(c));
    const metric = metricOf(c);
    if (!base || !(base[metric] > 0) || typeof c[metric] !== 'number') {
      continue;
    }
    const ratio = c[metric] / base[metric];
    out.push({ scenario: matrixOf(c), link: c.link, mode: c.mode, column: columnOf(c), layer: c.layer, ratio, cell: c, base });
    if (c.scenario === 'stream' && !(c.keys > 1) && keyed.has(c.records_per_msg)) {
      out.push({ scenario: 'keys', link: c.link, mode: c.mode, column: columnOf(c, 'keys'), layer: c.layer, ratio, cell: c, base });
    }
  }
  return out;
}

// The background of a ratio: white at 1.0, toward blue above and red below,
// on a log scale, saturated at 2× and 0.5×. Returns [css colour, dark?].
export function ratioColor(ratio) {
  const t = Math.max(-1, Math.min(1, Math.log2(ratio)));
  const end = t >= 0 ? ABOVE : BELOW;
  const mix = end.map((v) => Math.round(255 + (v - 255) * Math.abs(t) * 0.85));
  return [`rgb(${mix.join(', ')})`, Math.abs(t) > 0.6];
}

function formatRatio(ratio) {
  return ratio >= 9.995 ? ratio.toFixed(0) : ratio.toFixed(2);
}

export class RatioView {
  constructor(onPick) {
    this.onPick = onPick;
    this.el = el('section', { class: 'ratios', 'aria-label': 'tern against tcp' });
  }

  // rows: every result row of the run; links: Map name -> links row, in the run's order.
  render(rows, links) {
    clear(this.el);
    const all = ratios(rows);
    if (all.length === 0) {
      return;
    }
    const layers = [...new Set(all.map((r) => r.layer))].sort((a, b) => (a === 'tern' ? -1 : b === 'tern' ? 1 : a.localeCompare(b)));
    const others = layers.filter((l) => l !== 'tern');
    this.el.append(
      el('h3', { text: 'tern against plain TCP' }),
      el(
        'p',
        { class: 'muted small' },
        'Each cell: records/s of tern over those of tcp on the same link and cell (bytes/s for bytes), the medians of their repeats; ',
        'b batched, ll low latency',
        others.length ? `; ${others.join(', ')}/tcp beside it` : '',
        '; under it, tern\'s share of the link where the link has a bandwidth. Click a figure for its trend. ',
        this.legend(),
      ),
    );
    for (const scenario of SCENARIOS) {
      const mine = all.filter((r) => r.scenario === scenario);
      if (mine.length > 0) {
        this.el.append(this.matrix(scenario, mine, links, others));
      }
    }
  }

  legend() {
    const stops = [0.5, 0.71, 1, 1.41, 2];
    return el(
      'span',
      { class: 'ratio-legend' },
      stops.map((r) => {
        const [color, dark] = ratioColor(r);
        const swatch = el('span', { class: dark ? 'swatch dark' : 'swatch', text: r === 1 ? '1.0' : `${r}` });
        swatch.style.backgroundColor = color;
        return swatch;
      }),
    );
  }

  matrix(scenario, mine, links, others) {
    const columns = [...new Map(mine.map((r) => [r.column.key, r.column])).values()].sort((a, b) => a.key - b.key);
    const order = [...links.keys()];
    const rank = (name) => (order.indexOf(name) < 0 ? order.length : order.indexOf(name));
    const names = [...new Set(mine.map((r) => r.link))].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
    const body = names.map((link) => {
      const info = links.get(link);
      const limited = info && info.bandwidth_Bps > 0;
      return el(
        'tr',
        { dataset: { link } },
        el('th', {}, link, el('div', { class: 'muted small', text: limited ? `${formatRate(info.bandwidth_Bps)}B/s` : 'no limit' })),
        columns.map((column) => this.cell(scenario, link, column, mine, limited, others)),
      );
    });
    return el(
      'table',
      { class: 'data ratio-matrix', dataset: { scenario } },
      el('caption', { text: `${scenario}: tern/tcp by ${AXIS[scenario]}` }),
      el('thead', {}, el('tr', {}, el('th', { text: 'link' }), columns.map((c) => el('th', { class: 'num', text: c.label })))),
      el('tbody', {}, body),
    );
  }

  cell(scenario, link, column, mine, limited, others) {
    const here = mine.filter((r) => r.link === link && r.column.key === column.key);
    const td = el('td', { class: 'ratio-cell', dataset: { column: String(column.key) } });
    for (const [mode, label] of MODES) {
      const tern = here.find((r) => r.layer === 'tern' && r.mode === mode);
      const line = el('div', { class: 'ratio-line' });
      if (tern) {
        line.append(this.figure(tern, mode === 'batched' ? 'b' : 'll', label, scenario === 'stream' || scenario === 'keys'));
      }
      for (const layer of others) {
        const other = here.find((r) => r.layer === layer && r.mode === mode);
        if (other) {
          line.append(this.figure(other, layer, label, scenario === 'stream' || scenario === 'keys'));
        }
      }
      if (line.childNodes.length > 0) {
        td.append(line);
      }
    }
    const share = here.find((r) => r.layer === 'tern' && r.mode === 'batched') || here.find((r) => r.layer === 'tern');
    if (limited && share && typeof share.cell.link_share === 'number') {
      td.append(el('div', { class: 'link-share muted small', text: `${formatPercent(share.cell.link_share, 0)} of link` }));
    }
    return td;
  }

  // One ratio: a button that opens the cell's trend (stream cells).
  figure(r, tag, modeLabel, pickable) {
    const [color, dark] = ratioColor(r.ratio);
    const metric = metricOf(r.cell);
    const title = `${r.link} ${r.layer} ${modeLabel}, ${r.column.label}: ${formatRate(r.cell[metric])} against tcp ${formatRate(r.base[metric])} (${r.ratio.toFixed(3)}×)`;
    const attrs = {
      class: `ratio${dark ? ' dark' : ''}${r.layer === 'tern' ? '' : ' other'}`,
      title,
      dataset: { layer: r.layer, mode: r.mode, ratio: String(r.ratio), link: r.link, records: String(r.cell.records_per_msg), keys: String(r.cell.keys ?? 1) },
    };
    const content = [el('span', { class: 'tag', text: tag }), ` ${formatRatio(r.ratio)}`];
    const node = pickable
      ? el('button', { ...attrs, type: 'button', onclick: () => this.onPick(r.cell) }, ...content)
      : el('span', attrs, ...content);
    node.style.backgroundColor = color;
    return node;
  }
}
