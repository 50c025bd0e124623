// live-graph.js: the watched network as a graph, drawn in SVG by hand: a
// circle per node (routers larger and filled, nodes that send no telemetry,
// such as the dashboard itself, dashed), a line per pair of connected nodes
// labelled with its round trip. Routers sit on an inner ring (or in the
// middle when there is one), every other node on an outer ring, each ring in
// name order, so a node keeps its place from one second to the next.

const SVG = 'http://www.w3.org/2000/svg';
const WIDTH = 720;
const HEIGHT = 380;

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) {
    node.setAttribute(key, String(value));
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

// 85 -> "85 µs", 1500 -> "1.5 ms"
export function formatMicros(us) {
  if (typeof us !== 'number' || !Number.isFinite(us)) {
    return '–';
  }
  if (us >= 1e6) {
    return `${Number((us / 1e6).toPrecision(3))} s`;
  }
  if (us >= 1000) {
    return `${Number((us / 1000).toPrecision(3))} ms`;
  }
  return `${Number(us.toPrecision(3))} µs`;
}

function ring(names, cx, cy, radius, start) {
  const places = new Map();
  names.forEach((name, i) => {
    const angle = start + (2 * Math.PI * i) / names.length;
    places.set(name, { x: cx + radius * Math.cos(angle), y: cy + radius * Math.sin(angle) });
  });
  return places;
}

// Where each node goes: routers inside, everything else around them.
export function layout(nodes) {
  const cx = WIDTH / 2;
  const cy = HEIGHT / 2;
  const byName = (a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0);
  const routers = nodes.filter((n) => n.mode === 'router').sort(byName).map((n) => n.node);
  const others = nodes.filter((n) => n.mode !== 'router').sort(byName).map((n) => n.node);
  const places = new Map();
  if (routers.length === 1) {
    places.set(routers[0], { x: cx, y: cy });
  } else if (routers.length > 1) {
    for (const [name, p] of ring(routers, cx, cy, 70, -Math.PI / 2)) {
      places.set(name, p);
    }
  }
  const outer = routers.length === 0 && others.length === 1 ? 0 : 140;
  for (const [name, p] of ring(others, cx, cy, outer, -Math.PI / 2 + Math.PI / Math.max(1, others.length))) {
    places.set(name, p);
  }
  return places;
}

export class LiveGraph {
  constructor(container) {
    this.root = svg('svg', { class: 'live-graph', viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': 'nodes and connections' });
    container.append(this.root);
  }

  render(nodes, links) {
    while (this.root.firstChild) {
      this.root.firstChild.remove();
    }
    const places = layout(nodes);
    const edges = svg('g', { class: 'live-links' });
    const circles = svg('g', { class: 'live-nodes' });
    for (const link of links) {
      const a = places.get(link.a);
      const b = places.get(link.b);
      if (!a || !b) {
        continue;
      }
      const group = svg('g', { class: 'live-link', 'data-a': link.a, 'data-b': link.b });
      group.append(svg('line', { x1: a.x, y1: a.y, x2: b.x, y2: b.y }));
      const label = link.rtt_us === null || link.rtt_us === undefined ? 'rtt –' : `rtt ${formatMicros(link.rtt_us)}`;
      // Beside the line's middle, on its right-hand side, so the text never sits on the line.
      const length = Math.hypot(b.x - a.x, b.y - a.y) || 1;
      const side = b.y >= a.y ? 1 : -1;
      const x = (a.x + b.x) / 2 + (side * 12 * (b.y - a.y)) / length;
      const y = (a.y + b.y) / 2 - (side * 12 * (b.x - a.x)) / length + 4;
      group.append(svg('text', { x, y, 'text-anchor': 'middle', class: 'live-link-label' }, label));
      group.append(svg('title', {}, `${link.a} – ${link.b}: ${label}, ${link.connections} connection${link.connections === 1 ? '' : 's'}`));
      edges.append(group);
    }
    for (const node of nodes) {
      const p = places.get(node.node);
      const router = node.mode === 'router';
      const kind = !node.reporting ? (node.observer ? 'observer' : 'silent') : router ? 'router' : 'peer';
      const group = svg('g', { class: `live-node ${kind}`, 'data-node': node.node, 'data-kind': kind });
      group.append(svg('circle', { cx: p.x, cy: p.y, r: router ? 24 : 16 }));
      if (router) {
        group.append(svg('text', { x: p.x, y: p.y + 5, 'text-anchor': 'middle', class: 'live-node-mark' }, 'R'));
      }
      // The name below a node in the lower half, above one in the upper half: away from the middle.
      const radius = router ? 24 : 16;
      const lines = node.observer ? [node.node, '(this dashboard)'] : [node.node];
      const below = p.y >= HEIGHT / 2 - 1;
      lines.forEach((line, i) => {
        const y = below ? p.y + radius + 16 + 14 * i : p.y - radius - 8 - 14 * (lines.length - 1 - i);
        group.append(svg('text', { x: p.x, y, 'text-anchor': 'middle', class: 'live-node-name' }, line));
      });
      const details = node.reporting
        ? `${node.node}: ${node.mode}, up ${Math.round(node.uptime_s)} s, ${node.connections.length} connection${node.connections.length === 1 ? '' : 's'}, last report ${node.age_ms} ms ago`
        : `${node.node}: sends no telemetry${node.observer ? ' (this dashboard)' : ''}`;
      group.append(svg('title', {}, details));
      circles.append(group);
    }
    this.root.append(edges, circles);
  }
}
