// series.js: the lines of a link chart (one per layer and mode) and their looks.
// Layers tern and tcp and modes batched and lowlat come first in this order;
// any other layer or mode the bench writes gets a line too.

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

// The series present in results, known ones first.
export function seriesOf(results) {
  const keys = KNOWN.map(([layer, mode]) => ({ layer, mode }));
  for (const r of results) {
    if (!keys.some((k) => k.layer === r.layer && k.mode === r.mode)) {
      keys.push({ layer: r.layer, mode: r.mode });
    }
  }
  return keys.map((k) => ({ ...k, key: `${k.layer} ${k.mode}` }));
}

export function seriesStyle(series, index) {
  const color = LAYER_COLORS[series.layer] || SPARE_COLORS[index % SPARE_COLORS.length];
  const lowlat = series.mode === 'lowlat';
  return {
    borderColor: color,
    backgroundColor: lowlat ? color + '66' : color + 'cc',
    borderDash: lowlat ? [6, 4] : [],
    pointStyle: lowlat ? 'triangle' : 'circle',
  };
}

// Stream results that succeeded: the only ones charted as figures.
export function chartable(result) {
  return result.scenario === 'stream' && !result.failed;
}
