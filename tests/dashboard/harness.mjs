// harness.mjs: what the dashboard's Node.js tests share: starting and
// stopping `tern dashboard`, temporary folders, bounded waits, checks, an
// HTTP GET and a websocket client that records what it receives.
// Every wait has a deadline and every child process is stopped on exit.

import { spawn, spawnSync } from 'node:child_process';
import http from 'node:http';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export const TERN = process.env.TERN;
export const WEB_DIR = process.env.TERN_WEB_DIR;
export const OUT_DIR = process.env.TERN_TEST_OUT || tmpdir();
export const SKIP = 77;

if (!TERN || !WEB_DIR) {
  console.error('set TERN (the tern executable) and TERN_WEB_DIR (the web/ folder); ctest does');
  process.exit(2);
}

const children = new Set();
const tempDirs = [];

function cleanup() {
  for (const child of children) {
    child.kill('SIGKILL');
  }
  for (const dir of tempDirs) {
    rmSync(dir, { recursive: true, force: true });
  }
}
process.on('exit', cleanup);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => process.exit(1));
}

export function fail(message) {
  throw new Error(message);
}

export function check(condition, message) {
  if (!condition) {
    fail(message);
  }
}

export function step(message) {
  console.log(`-- ${message}`);
}

export function tempDir() {
  const dir = mkdtempSync(join(tmpdir(), 'tern-dash-'));
  tempDirs.push(dir);
  return dir;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export async function waitFor(what, fn, timeoutMs = 10000, everyMs = 50) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await fn();
      if (last) {
        return last;
      }
    } catch (error) {
      last = error;
    }
    await sleep(everyMs);
  }
  fail(`timed out after ${timeoutMs} ms waiting for ${what}${last instanceof Error ? ` (${last.message})` : ''}`);
}

// A package from web/node_modules (installed by `npm ci` in web/).
export async function webModule(name, entry) {
  const path = join(WEB_DIR, 'node_modules', name, entry);
  if (!existsSync(path)) {
    console.error(`${name} is not installed in ${WEB_DIR}/node_modules: run scripts/setup --test (npm ci in web/)`);
    process.exit(1);
  }
  return import(pathToFileURL(path).href);
}

// Runs tern with args to completion; returns { status, stdout, stderr }.
export function runTern(args, timeoutMs = 20000, env = {}) {
  const result = spawnSync(TERN, args, { encoding: 'utf8', timeout: timeoutMs, env: { ...process.env, ...env } });
  return { status: result.status, stdout: result.stdout || '', stderr: result.stderr || '', error: result.error };
}

// Starts a child and collects its output; stop() ends it with SIGTERM.
export function startProcess(args, options = {}) {
  const child = spawn(TERN, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
  children.add(child);
  const proc = { child, stdout: '', stderr: '', exited: null };
  child.stdout.on('data', (chunk) => (proc.stdout += chunk));
  child.stderr.on('data', (chunk) => (proc.stderr += chunk));
  proc.exit = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      children.delete(child);
      proc.exited = { code, signal };
      resolve(proc.exited);
    });
  });
  proc.stop = async (timeoutMs = 10000) => {
    if (!proc.exited) {
      child.kill('SIGTERM');
    }
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    const result = await proc.exit;
    clearTimeout(timer);
    return result;
  };
  return proc;
}

// `tern dashboard` on a free loopback port; resolves once it prints its URL.
export async function startDashboard(db, extra = []) {
  const proc = startProcess(['dashboard', '--db', db, '--listen', '127.0.0.1:0', '--web', WEB_DIR, ...extra]);
  const match = await waitFor(
    'the dashboard to print its URL',
    () => {
      if (proc.exited) {
        fail(`tern dashboard exited (${JSON.stringify(proc.exited)}): ${proc.stderr}`);
      }
      return /http:\/\/127\.0\.0\.1:(\d+)\//.exec(proc.stdout);
    },
    15000,
  );
  proc.port = Number(match[1]);
  proc.url = `http://127.0.0.1:${proc.port}/`;
  proc.wsUrl = `ws://127.0.0.1:${proc.port}/ws`;
  proc.stopCleanly = async () => {
    const result = await proc.stop();
    check(result.code === 0, `tern dashboard should exit 0 on SIGTERM, got ${JSON.stringify(result)}; stderr: ${proc.stderr}`);
  };
  return proc;
}

// Headless Chromium (Debian's, or $CHROMIUM) driven by playwright-core.
export async function launchChromium() {
  const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
  check(existsSync(executablePath), `${executablePath} not found: install chromium (scripts/setup --test does)`);
  const { chromium } = await webModule('playwright-core', 'index.mjs');
  return chromium.launch({
    executablePath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

// A page of the dashboard in a browser (playwright-core), 1400x1000; every
// dialog, page error, console error, failed request and request outside the
// dashboard is added to problems, which a test expects to stay empty.
export async function openPage(browser, url, problems) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.on('dialog', (dialog) => {
    problems.push(`a dialog opened: ${dialog.message()}`);
    dialog.dismiss().catch(() => {});
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (msg) => {
    if (msg.type() === 'error') {
      problems.push(`console error: ${msg.text()}`);
    }
  });
  page.on('requestfailed', (req) => problems.push(`request failed: ${req.url()}`));
  // url may carry a fragment (#run=1): what the page loads is under its origin.
  const origin = `${new URL(url).origin}/`;
  page.on('request', (req) => {
    if (!req.url().startsWith(origin) && !req.url().startsWith('ws://127.0.0.1') && !req.url().startsWith('data:')) {
      problems.push(`the page asked for something outside the dashboard: ${req.url()}`);
    }
  });
  await page.goto(url);
  return page;
}

// Runs main, printing a failure and exiting non-zero on error.
export async function main(name, body) {
  const started = Date.now();
  try {
    await body();
    console.log(`${name}: passed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    process.exit(0);
  } catch (error) {
    console.error(`${name}: FAILED: ${error.stack || error}`);
    process.exit(1);
  }
}

// GET a path exactly as given (no normalisation of "..").
export function httpGet(port, path, timeoutMs = 5000) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method: 'GET' }, (res) => {
      let body = '';
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`GET ${path} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

// A websocket client that records every message, with bounded waits.
export class WsClient {
  // WebSocket: the ws package's class (webModule('ws', 'index.js')).
  constructor(WebSocket, url, options = {}) {
    this.messages = [];
    this.ws = new WebSocket(url, options);
    this.closed = null;
    this.ws.on('message', (data) => this.messages.push(JSON.parse(data.toString())));
    this.ws.on('close', (code, reason) => (this.closed = { code, reason: reason.toString() }));
    this.ws.on('error', (error) => (this.error = error));
  }

  opened() {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('websocket did not open in 5 s')), 5000);
      this.ws.once('open', () => {
        clearTimeout(timer);
        resolve();
      });
      this.ws.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
  }

  // The first message from index on that satisfies pred.
  async next(what, pred, timeoutMs = 5000) {
    return waitFor(what, () => this.messages.find(pred), timeoutMs, 20);
  }

  async request(msg) {
    this.ws.send(JSON.stringify(msg));
    return this.next(`a reply to ${JSON.stringify(msg).slice(0, 80)}`, (m) => m.req === msg.req);
  }

  close() {
    this.ws.terminate();
  }
}
