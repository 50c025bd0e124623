// network.mjs: a small tern network of real processes for the Live view's
// tests: a router (live-R), a subscriber to demo/** (live-S) and a publisher
// of demo/a at 1000 messages a second (live-P), each reporting its telemetry
// every second; and `tern dashboard --connect` to the router.

import { check, fail, startDashboard, startProcess, waitFor } from './harness.mjs';

export const NODES = ['live-R', 'live-S', 'live-P'];

// Starts the three nodes; resolves once the router has both peers.
export async function startNetwork() {
  const router = startProcess(['node', '--mode', 'router', '--listen', 'tcp://127.0.0.1:0', '--id', 'live-R']);
  const match = await waitFor(
    'the router to print its endpoint',
    () => {
      if (router.exited) {
        fail(`the router exited (${JSON.stringify(router.exited)}): ${router.stderr}`);
      }
      return /listening on (\S+)/.exec(router.stderr);
    },
    15000,
  );
  const endpoint = match[1];
  const sub = startProcess(['sub', 'demo/**', '--connect', endpoint, '--format', 'none', '--id', 'live-S']);
  // Long enough to outlast the test, which stops it.
  const pub = startProcess(['pub', 'demo/a', '--connect', endpoint, '--size', '64', '--rate', '1000', '--count', '100000000', '--id', 'live-P']);
  await waitFor('the router to see live-S and live-P', () => /connected from live-S/.test(router.stderr) && /connected from live-P/.test(router.stderr), 20000);
  const stop = async () => {
    for (const proc of [pub, sub, router]) {
      await proc.stop();
    }
  };
  // The end of each process's stderr (and how it exited), for a failure's message.
  const logs = () =>
    Object.entries({ router, sub, pub })
      .map(([name, proc]) => `---- ${name}${proc.exited ? ` exited ${JSON.stringify(proc.exited)}` : ''}:\n${proc.stderr.slice(-1500)}`)
      .join('\n');
  return { endpoint, router, sub, pub, stop, logs };
}

// Runs body; a failure's message gets the network's and the dashboard's logs.
export async function explained(network, dashboard, body) {
  try {
    return await body();
  } catch (error) {
    error.message += `\n${network.logs()}\n---- dashboard:\n${dashboard.stderr.slice(-1500)}`;
    throw error;
  }
}

// `tern dashboard --connect` to the network's router.
export async function startLiveDashboard(db, network) {
  const dashboard = await startDashboard(db, ['--connect', network.endpoint]);
  await waitFor('the dashboard to say what it watches', () => /watching the network of (\S+) as (\S+)/.exec(dashboard.stdout), 10000);
  const [, endpoint, observer] = /watching the network of (\S+) as (\S+)/.exec(dashboard.stdout);
  check(endpoint === network.endpoint, `the dashboard watches ${endpoint}, not ${network.endpoint}`);
  dashboard.observer = observer;
  return dashboard;
}
