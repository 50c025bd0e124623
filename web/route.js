// route.js: the page's state in the URL fragment, so that a run, a trend or
// a comparison can be bookmarked, reloaded and sent, and the browser's back
// and forward buttons move between views:
//
//   #run=N                           run N
//   #trend=LINK,LAYER,MODE,RECORDS   the trend of a stream cell
//   #trend=LINK,LAYER,MODE,RECORDS,KEYS   of a stream over KEYS keys (tern bench --keys)
//   #compare=A,B                     run A (the baseline) against run B
//   #live                            the Live view
//
// Each part of a trend is percent-encoded (encodeURIComponent), so a link
// name with a comma survives. Anything else parses to null (the default view).
// No DOM here: the functions are pure.

const POSITIVE = /^[1-9][0-9]{0,15}$/;
const COUNT = /^(0|[1-9][0-9]{0,15})$/;

function decode(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    return null;
  }
}

// '#trend=lan,tern,batched,64' -> {view: 'trend', cell: {...}}; null when it is no route.
export function parseRoute(hash) {
  const text = String(hash || '').replace(/^#/, '');
  const eq = text.indexOf('=');
  const name = eq < 0 ? text : text.slice(0, eq);
  const parts = eq < 0 ? [] : text.slice(eq + 1).split(',').map(decode);
  if (parts.some((p) => p === null)) {
    return null;
  }
  if (name === 'run' && parts.length === 1 && POSITIVE.test(parts[0])) {
    return { view: 'run', run: Number(parts[0]) };
  }
  if (name === 'trend' && (parts.length === 4 || (parts.length === 5 && POSITIVE.test(parts[4]))) && parts.slice(0, 3).every((p) => p.length > 0) && COUNT.test(parts[3])) {
    const [link, layer, mode, records, keys] = parts;
    return { view: 'trend', cell: { scenario: 'stream', link, layer, mode, records_per_msg: Number(records), keys: keys === undefined ? 1 : Number(keys) } };
  }
  if (name === 'compare' && parts.length === 2 && parts.every((p) => POSITIVE.test(p))) {
    return { view: 'compare', a: Number(parts[0]), b: Number(parts[1]) };
  }
  if (name === 'live' && eq < 0) {
    return { view: 'live' };
  }
  return null;
}

// The fragment of a route, '#...'; '' for null.
export function formatRoute(route) {
  if (!route) {
    return '';
  }
  switch (route.view) {
    case 'run':
      return `#run=${route.run}`;
    case 'trend': {
      const c = route.cell;
      const parts = [c.link, c.layer, c.mode, String(c.records_per_msg)];
      if (c.keys > 1) {
        parts.push(String(c.keys));
      }
      return `#trend=${parts.map(encodeURIComponent).join(',')}`;
    }
    case 'compare':
      return `#compare=${route.a},${route.b}`;
    case 'live':
      return '#live';
    default:
      return '';
  }
}

export function sameRoute(a, b) {
  return formatRoute(a) === formatRoute(b);
}
