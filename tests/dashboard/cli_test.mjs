// cli_test.mjs: `tern dashboard`'s command line: help, bad options (one
// error line, exit 2), a port in use (exit 1), loopback-only binding.

import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { check, main, runTern, startDashboard, step, tempDir, WEB_DIR } from './harness.mjs';

function expectRefused(args, mentions) {
  const result = runTern(['dashboard', ...args]);
  const lines = result.stderr.trim().split('\n').filter(Boolean);
  check(result.status === 2, `dashboard ${args.join(' ')} should exit 2, got ${result.status}: ${result.stderr}`);
  check(lines.length === 1, `dashboard ${args.join(' ')} should print one error line, got: ${result.stderr}`);
  check(lines[0].includes(mentions), `the error for ${args.join(' ')} should mention "${mentions}": ${lines[0]}`);
}

// Addresses listening on port, from /proc/net/tcp and tcp6 (state 0A = LISTEN).
function listeners(port) {
  const found = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 4 || fields[3] !== '0A') {
        continue;
      }
      const [address, hexPort] = fields[1].split(':');
      if (parseInt(hexPort, 16) === port) {
        found.push({ file, address });
      }
    }
  }
  return found;
}

await main('dashboard_cli', async () => {
  step('--help');
  const help = runTern(['dashboard', '--help']);
  check(help.status === 0, `--help should exit 0: ${help.stderr}`);
  for (const option of ['--db', '--listen', '--web']) {
    check(help.stdout.includes(option), `--help should describe ${option}`);
  }

  step('bad options');
  expectRefused(['--bogus'], '--bogus');
  expectRefused(['--db'], '--db needs a value');
  expectRefused(['--listen', 'nonsense'], 'HOST:PORT');
  expectRefused(['--listen', '127.0.0.1:70000'], 'port');
  expectRefused(['--listen', '127.0.0.1:http'], 'port');
  expectRefused(['--listen', 'example.com:8080'], 'IP address');
  expectRefused(['--listen', '::1:8080'], 'brackets');
  expectRefused(['--web', join(tempDir(), 'nowhere')], 'index.html');
  expectRefused(['--connect'], '--connect needs a value');
  expectRefused(['--connect', 'nonsense', '--listen', '127.0.0.1:0', '--web', WEB_DIR], '--connect nonsense');

  step('binds 127.0.0.1 only');
  const dir = tempDir();
  const first = await startDashboard(join(dir, 'none.db'));
  const bound = listeners(first.port);
  check(bound.length === 1, `expected one listening socket on port ${first.port}, found ${JSON.stringify(bound)}`);
  check(bound[0].file === '/proc/net/tcp' && bound[0].address === '0100007F', `the dashboard should listen on 127.0.0.1 only, found ${JSON.stringify(bound)}`);

  step('port in use');
  // libwebsockets leaks a little when it cannot bind: not the dashboard's leak.
  const lsan = { LSAN_OPTIONS: `suppressions=${join(dirname(fileURLToPath(import.meta.url)), 'lsan-lws.supp')}:print_suppressions=0` };
  const taken = runTern(['dashboard', '--db', join(dir, 'none.db'), '--web', WEB_DIR, '--listen', `127.0.0.1:${first.port}`], 20000, lsan);
  check(taken.status === 1, `a second dashboard on a taken port should exit 1, got ${taken.status}`);
  check(/^tern dashboard: cannot listen on 127\.0\.0\.1:\d+.*\n$/.test(taken.stderr), `one error line should say it cannot listen: ${taken.stderr}`);
  await first.stopCleanly();
});
