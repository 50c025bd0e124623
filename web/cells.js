// cells.js: result rows reduced to cells. With `tern bench --repeat N` a cell
// (scenario, link, layer, mode, size, concurrency, batch, rate) has N rows,
// one per repeat. The page shows one figure per cell: the median of the
// repeats that succeeded, with their spread (min–max) beside it, never N
// points as if they were N cells. The median is bench/stats.c's (the mean of
// the middle two of an even count). No DOM here: the functions are pure.

// The figures of a row that become medians in its cell.
const FIGURES = ['records_per_s', 'bytes_per_s', 'link_share', 'cpu_s_per_gb', 'lat_p50_us', 'lat_p99_us', 'lat_p999_us', 'spread', 'seconds', 'messages', 'records', 'bytes'];

// What makes two rows the same cell (the key of bench/compare.c, and keys).
export function cellKey(r) {
  return [r.scenario, r.link, r.layer, r.mode, r.records_per_msg, r.payload_bytes, r.concurrency ?? 1, r.batch_bytes ?? '', r.rate > 0 ? r.rate : '', r.keys ?? ''].join('|');
}

// {n, median, min, max} of the finite numbers in values; null when there are none.
export function summarize(values) {
  const v = values.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b);
  const n = v.length;
  if (n === 0) {
    return null;
  }
  const median = n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return { n, median, min: v[0], max: v[n - 1] };
}

// One object per cell, in the order of each cell's first row: the fields of
// its first row with each figure replaced by the median of the successful
// repeats, and
//   rows:    every row of the cell, in the order given
//   repeats: {n: rows, ok: successful rows, failed: failed rows}
//   range:   {records_per_s: {n, median, min, max}, ...} over the successful rows
//   failed:  1 only when no repeat succeeded (then the figures are the first row's)
export function reduceCells(rows) {
  const groups = new Map();
  for (const row of rows) {
    const key = cellKey(row);
    if (!groups.has(key)) {
      groups.set(key, []);
    }
    groups.get(key).push(row);
  }
  return [...groups.entries()].map(([key, group]) => {
    const ok = group.filter((r) => !r.failed);
    const cell = { ...group[0], key, rows: group, repeats: { n: group.length, ok: ok.length, failed: group.length - ok.length }, range: {} };
    if (ok.length === 0) {
      return cell;
    }
    cell.failed = 0;
    cell.error = null;
    for (const figure of FIGURES) {
      const s = summarize(ok.map((r) => r[figure]));
      cell[figure] = s ? s.median : null;
      if (s) {
        cell.range[figure] = s;
      }
    }
    return cell;
  });
}

// "2.95 M (2.90 M–3.01 M)" for a cell's figure over several repeats, else its value.
export function formatSpread(cell, figure, format) {
  const s = cell.range && cell.range[figure];
  if (!s || s.n < 2) {
    return format(cell[figure]);
  }
  return `${format(s.median)} (${format(s.min)}–${format(s.max)})`;
}
