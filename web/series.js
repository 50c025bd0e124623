// series.js: the lines of a link chart (one per layer and mode) and their looks.
// Layers tern and tcp and modes batched and lowlat come first in this order;
// any other layer the bench writes (zmq, ...) follows with a colour of its
// own, in both modes, and any other mode gets a line too.

const KNOWN = [
  ['tern', 'batched'],
  ['tern', 'lowlat'],
  ['tcp', 'batched'],
  ['tcp', 'lowlat'],
];
const LAYER_COLORS = { tern: '#1f6fd1', tcp: '#e07b00' };
const SPARE_COLORS = ['#2a9d55', '#8e44ad', '#b03a2e', '#5d6d7e'];

export function seriesKey(result) {
  return `${result.layer} ${result.mode}`;
}

// The series present in results, known ones first; each with the colour of its layer.
export function seriesOf(results) {
  const keys = KNOWN.map(([layer, mode]) => ({ layer, mode }));
  for (const r of results) {
    if (!keys.some((k) => k.layer === r.layer && k.mode === r.mode)) {
      keys.push({ layer: r.layer, mode: r.mode });
    }
  }
  const extra = [...new Set(keys.map((k) => k.layer).filter((layer) => !LAYER_COLORS[layer]))];
  return keys.map((k) => ({ ...k, key: `${k.layer} ${k.mode}`, color: LAYER_COLORS[k.layer] || SPARE_COLORS[extra.indexOf(k.layer) % SPARE_COLORS.length] }));
}

export function seriesStyle(series) {
  const color = series.color;
  const lowlat = series.mode === 'lowlat';
  return {
    borderColor: color,
    backgroundColor: lowlat ? color + '66' : color + 'cc',
    borderDash: lowlat ? [6, 4] : [],
    pointStyle: lowlat ? 'triangle' : 'circle',
  };
}

// Closed-loop stream cells that succeeded: the only ones charted as records/s
// against records per message. An open-loop cell (--rate) sends at a set
// rate, so its records/s says nothing: it is listed with its latency instead.
export function chartable(cell) {
  return cell.scenario === 'stream' && !cell.failed && !(cell.rate > 0) && !(cell.keys > 1);
}
