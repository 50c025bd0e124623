// app.js: the dashboard page. Keeps the list of runs and the selected run in
// step with the server: full lists on connect, then pushes ("run_added",
// "result", "run_updated") while a bench writes. With `tern dashboard
// --connect`, the Live view follows the watched network ("live_history",
// "live"). The view shown lives in the URL fragment (route.js): navigating
// pushes a history entry, back and forward (popstate) show the entry's view,
// and a URL opened cold shows its view once the server has sent the runs.

import { Connection } from './connection.js';
import { el, clear } from './dom.js';
import { RunsList } from './runs-list.js';
import { RunView } from './run-view.js';
import { TrendView } from './trend-view.js';
import { CompareView } from './compare-view.js';
import { LiveView } from './live-view.js';
import { formatRoute, parseRoute } from './route.js';

const state = {
  db: null,
  runs: [],
  selected: null,
  view: 'run',
  // The route of the URL, applied once the runs are known (and again on reconnect).
  route: parseRoute(location.hash),
};

const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
const connection = new Connection(`${scheme}://${location.host}/ws`);
const runsList = new RunsList(document.getElementById('runs'), (id) => {
  selectRun(id, true);
  if (state.view === 'run') {
    navigate({ view: 'run', run: id });
  }
});
const runView = new RunView(document.getElementById('view-run'), pickCell);
const trendView = new TrendView(document.getElementById('view-trend'), connection);
const compareView = new CompareView(document.getElementById('view-compare'), connection);
const liveView = new LiveView(document.getElementById('view-live'));
const follow = document.getElementById('follow');
const notice = document.getElementById('notice');
const errorBar = document.getElementById('error');

if (typeof window.Chart !== 'function') {
  showError('The chart library did not load (/vendor/chart.umd.min.js): run `npm ci --omit=dev` in the web/ folder, then reload. Figures are in each panel\'s "values" table.');
} else {
  window.Chart.defaults.animation = false;
}

function showError(message) {
  errorBar.textContent = message;
  errorBar.hidden = !message;
}

// The missing or empty database message, and how to make one.
function showDatabase(db) {
  state.db = db;
  document.getElementById('db-path').textContent = db ? db.path : '';
  clear(notice);
  if (!db || db.state === 'ready') {
    notice.hidden = true;
    return;
  }
  const headline = {
    missing: 'There is no benchmark database here yet.',
    empty: 'The benchmark database has no runs yet.',
    broken: 'The benchmark database cannot be read.',
  }[db.state] || 'The benchmark database is not ready.';
  notice.append(
    el('strong', { text: headline }),
    el('p', { text: db.reason }),
    el('p', {}, 'Make one with ', el('code', { text: `tern bench --quick --db ${db.path}` }), '; this page shows the run as soon as the bench starts writing it.'),
  );
  notice.hidden = false;
}

function setView(view) {
  state.view = view;
  for (const button of document.querySelectorAll('.tabs button')) {
    button.setAttribute('aria-selected', button.dataset.view === view ? 'true' : 'false');
  }
  for (const name of ['run', 'trend', 'compare', 'live']) {
    document.getElementById(`view-${name}`).hidden = name !== view;
  }
}

// Shows a route's view: the run, the trend or the comparison it names.
function applyRoute(route) {
  state.route = route;
  if (!route) {
    setView('run');
    return;
  }
  setView(route.view);
  if (route.view === 'run') {
    if (state.runs.some((r) => r.id === route.run)) {
      if (state.selected !== route.run) {
        selectRun(route.run, true);
      }
    } else if (state.runs.length > 0) {
      state.selected = null;
      runView.showMessage(`There is no run #${route.run} in this database.`);
      renderRuns();
    }
  } else if (route.view === 'trend') {
    trendView.request(route.cell);
  } else if (route.view === 'compare') {
    compareView.compare(route.a, route.b);
  }
}

// Goes to a route: a new history entry (or, with replace, the current one changed).
function navigate(route, replace = false) {
  const hash = formatRoute(route);
  if (hash && hash !== location.hash) {
    history[replace ? 'replaceState' : 'pushState'](null, '', hash);
  }
  applyRoute(route);
}

window.addEventListener('popstate', () => applyRoute(parseRoute(location.hash)));
trendView.onShow = (cell) => navigate({ view: 'trend', cell });
compareView.onCompare = (a, b) => navigate({ view: 'compare', a, b });

// A tab shows what its view showed last (or what its pickers hold) and puts it in the URL.
function tabRoute(view) {
  if (view === 'run') {
    return state.selected ? { view, run: state.selected } : null;
  }
  if (view === 'trend') {
    const cell = trendView.cell || trendView.formCell();
    return TrendView.valid(cell) ? { view, cell } : null;
  }
  if (view === 'compare') {
    const pair = compareView.chosen || compareView.pair();
    return pair ? { view, ...pair } : null;
  }
  return { view };
}

for (const button of document.querySelectorAll('.tabs button')) {
  button.addEventListener('click', () => {
    const route = tabRoute(button.dataset.view);
    if (route) {
      navigate(route);
    } else {
      setView(button.dataset.view);
    }
  });
}

function renderRuns() {
  runsList.render(state.runs, state.selected);
  compareView.setRuns(state.runs, state.selected);
}

async function loadRun(id) {
  let reply;
  try {
    reply = await connection.request({ type: 'run', run_id: id });
  } catch {
    return; // reconnecting: the next list of runs loads it again
  }
  if (reply.type === 'error') {
    if (state.selected === id) {
      runView.showMessage(reply.error);
    }
    return;
  }
  if (state.selected === id) {
    runView.load(reply);
    trendView.setCells(runView.cells());
  }
}

function selectRun(id, byUser) {
  if (byUser) {
    // Choosing an older run stops following; choosing the newest resumes it.
    follow.checked = state.runs.length > 0 && state.runs[0].id === id;
  }
  if (state.selected === id && runView.run) {
    return;
  }
  state.selected = id;
  runView.select(id);
  renderRuns();
  loadRun(id);
}

function pickCell(result) {
  navigate({ view: 'trend', cell: { scenario: 'stream', link: result.link, layer: result.layer, mode: result.mode, records_per_msg: result.records_per_msg, keys: result.keys ?? 1 } });
}

connection.onStatus((status) => {
  const node = document.getElementById('connection');
  node.dataset.state = status;
  node.textContent = { open: 'live', connecting: 'connecting', closed: 'disconnected, retrying' }[status] || status;
});

connection.on('runs', (msg) => {
  showDatabase(msg.db);
  state.runs = (msg.runs || []).slice().sort((a, b) => b.id - a.id);
  if (state.runs.length === 0) {
    state.selected = null;
    runView.showMessage(msg.db && msg.db.state === 'ready' ? 'No runs.' : 'Nothing to show until a bench writes a run.');
    renderRuns();
    return;
  }
  const route = state.route;
  const named = route && route.view === 'run' && state.runs.some((r) => r.id === route.run);
  if (named) {
    // The URL names the run: follow only if it is the newest.
    follow.checked = state.runs[0].id === route.run;
  }
  const keep = state.runs.some((r) => r.id === state.selected) && !follow.checked;
  const id = named ? route.run : keep ? state.selected : state.runs[0].id;
  // After a reconnect the run may have moved on: load it again.
  state.selected = null;
  runView.runId = null;
  selectRun(id, false);
  // Now that the server answers, show the URL's view (a trend or comparison asks for it).
  if (route) {
    applyRoute(route);
  }
});

connection.on('run_added', (msg) => {
  if (state.runs.some((r) => r.id === msg.run.id)) {
    return;
  }
  state.runs.unshift(msg.run);
  state.runs.sort((a, b) => b.id - a.id);
  if (state.db && state.db.state !== 'ready') {
    showDatabase({ ...state.db, state: 'ready' });
  }
  if (follow.checked || state.selected === null) {
    selectRun(msg.run.id, false);
    // Following: the URL names the run shown, without a history entry of its own.
    if (state.view === 'run') {
      navigate({ view: 'run', run: msg.run.id }, true);
    }
  } else {
    renderRuns();
  }
});

connection.on('run_updated', (msg) => {
  const index = state.runs.findIndex((r) => r.id === msg.run.id);
  if (index >= 0) {
    state.runs[index] = msg.run;
  }
  runView.updateRun(msg.run);
  renderRuns();
});

connection.on('result', (msg) => {
  const run = state.runs.find((r) => r.id === msg.run_id);
  // The run's counts already include the results up to last_result_id.
  if (run && msg.result.id > (run.last_result_id || 0)) {
    run.results = (run.results || 0) + 1;
    run.last_result_id = msg.result.id;
    if (msg.result.failed) {
      run.failed_cells = (run.failed_cells || 0) + 1;
    }
    renderRuns();
  }
  runView.addPushed(msg);
  if (msg.run_id === state.selected) {
    trendView.setCells(runView.cells());
  }
  if (trendView.matches(msg.result)) {
    trendView.request(trendView.cell);
  }
});

connection.on('error', (msg) => showError(`The server refused a request: ${msg.error}`));

connection.on('live_history', (msg) => liveView.onHistory(msg));
connection.on('live', (msg) => liveView.onLive(msg));

// A URL opened cold shows its view's tab at once; its content follows the runs.
if (state.route) {
  setView(state.route.view);
}
