// dom.js: building elements and formatting figures.
// Every string goes into the page as text (textContent or a text node),
// never as HTML, because run notes, host names and errors come from the
// database and the bench's command line.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) {
      continue;
    }
    if (key === 'class') {
      node.className = value;
    } else if (key === 'text') {
      node.textContent = String(value);
    } else if (key === 'dataset') {
      Object.assign(node.dataset, value);
    } else if (key.startsWith('on')) {
      node.addEventListener(key.slice(2), value);
    } else {
      node.setAttribute(key, value === true ? '' : String(value));
    }
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) {
      continue;
    }
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) {
    node.firstChild.remove();
  }
}

// 1234567 -> "1.23 M" (digits significant digits, 3 by default)
export function formatRate(value, digits = 3) {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    return '–';
  }
  const units = [[1e9, ' G'], [1e6, ' M'], [1e3, ' k']];
  for (const [size, unit] of units) {
    if (Math.abs(value) >= size) {
      return (value / size).toPrecision(digits) + unit;
    }
  }
  return value.toPrecision(digits);
}

// A formatRate with the fewest significant digits (3 to 7) that write
// different numbers of values differently: 1.836 M and 1.838 M, not 1.84 M twice.
export function rateFormatter(values) {
  const v = [...new Set(values.filter((x) => typeof x === 'number' && Number.isFinite(x)))];
  let digits = 3;
  while (digits < 7 && new Set(v.map((x) => formatRate(x, digits))).size < v.length) {
    digits++;
  }
  return (x) => formatRate(x, digits);
}

// A message size in binary units: 1024 -> "1 KiB", 65536 -> "64 KiB".
export function formatSize(bytes) {
  if (typeof bytes !== 'number' || !Number.isFinite(bytes)) {
    return '–';
  }
  const units = [[2 ** 30, ' GiB'], [2 ** 20, ' MiB'], [2 ** 10, ' KiB']];
  for (const [size, unit] of units) {
    if (bytes >= size) {
      return Number((bytes / size).toPrecision(3)) + unit;
    }
  }
  return `${bytes} B`;
}

export function formatBandwidth(bytesPerSecond) {
  if (bytesPerSecond === null || bytesPerSecond === undefined) {
    return 'unlimited';
  }
  return formatRate(bytesPerSecond) + 'B/s';
}

export function formatPercent(fraction, digits = 1) {
  if (typeof fraction !== 'number' || !Number.isFinite(fraction)) {
    return '–';
  }
  return (fraction * 100).toFixed(digits) + '%';
}

// Change from a to b in percent, signed: "+12.3%", "-4.0%".
export function formatChange(a, b) {
  const change = percentChange(a, b);
  if (change === null) {
    return '–';
  }
  return (change >= 0 ? '+' : '') + change.toFixed(1) + '%';
}

export function percentChange(a, b) {
  if (typeof a !== 'number' || typeof b !== 'number' || !(a > 0)) {
    return null;
  }
  return ((b - a) / a) * 100;
}

// "2026-12-02T10:00:03Z" -> "2026-12-02 10:00:03 UTC"; anything else unchanged.
export function formatDate(iso) {
  if (typeof iso !== 'string') {
    return '–';
  }
  const match = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d(?::\d\d)?)(?:\.\d+)?(Z|[+-]00:?00)?$/.exec(iso);
  if (!match) {
    return iso;
  }
  return `${match[1]} ${match[2]}${match[3] ? ' UTC' : ''}`;
}

export function text(value) {
  return value === null || value === undefined || value === '' ? '–' : String(value);
}
