// fixture.mjs: benchmark databases with realistic rows, written through the
// sqlite3 command-line tool, for the dashboard's tests. The figures follow a
// simple model (a per-message cost, capped by the link's bandwidth) with a
// seeded jitter of up to 10% per cell, so two runs differ a little, like real
// ones, and of up to 2% per repeat (`tern bench --repeat N` writes N rows a
// cell). Two runs written with the same seed have the same samples.
//
// As a command: node fixture.mjs FILE [RUNS] [REPEATS]  (writes RUNS finished runs)

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

export const LINKS = [
  { name: 'loopback', bandwidth_Bps: null, rtt_ms: 0 },
  { name: 'lan', bandwidth_Bps: 125e6, rtt_ms: 0 },
  { name: 'wifi', bandwidth_Bps: 12e6, rtt_ms: 10 },
  { name: 'lte', bandwidth_Bps: 6e6, rtt_ms: 50 },
  { name: 'wan', bandwidth_Bps: 25e6, rtt_ms: 100 },
  { name: 'unix', bandwidth_Bps: null, rtt_ms: 0 },
];
export const SIZES = [1, 4, 16, 64, 256, 1024];
export const LAYERS = ['tern', 'tcp'];
export const MODES = ['batched', 'lowlat'];
export const XSS_NOTE = '<img src=x onerror=alert(1)>';

const RECORD_BYTES = 40;

export function sql(value) {
  if (value === null || value === undefined) {
    return 'NULL';
  }
  if (typeof value === 'number') {
    return Number.isFinite(value) ? String(value) : 'NULL';
  }
  return `'${String(value).replace(/'/g, "''")}'`;
}

export function runSqlite(file, statements) {
  execFileSync('sqlite3', ['-bail', file], { input: `.timeout 5000\n${statements}\n`, stdio: ['pipe', 'ignore', 'inherit'] });
}

export function createDatabase(file) {
  runSqlite(file, readFileSync(join(here, 'schema.sql'), 'utf8'));
}

// A number in [0, 1) that depends only on seed.
function noise(seed) {
  const x = Math.sin(seed * 12.9898) * 43758.5453;
  return x - Math.floor(x);
}

function jitter(seed) {
  return 0.9 + 0.2 * noise(seed);
}

// Per layer: the cost of a record, and the share of a link it can fill.
const LAYER_MODEL = {
  tern: { perRecord: 45e-9, share: 0.94 },
  tcp: { perRecord: 40e-9, share: 0.97 },
  zmq: { perRecord: 70e-9, share: 0.9 },
};

// One result row: records/s from a per-message cost, capped by the link, then
// scaled (scale 0.5: a run that is half as fast in every cell).
export function resultRow(runId, link, layer, mode, size, seed, scale = 1, repeat = 0) {
  const perMessage = mode === 'lowlat' ? 4e-6 : 1.2e-6;
  const model = LAYER_MODEL[layer] ?? LAYER_MODEL.zmq;
  let rate = (size / (perMessage + size * model.perRecord)) * jitter(seed) * (0.98 + 0.04 * noise(seed + 0.37 * (repeat + 1)));
  if (link.bandwidth_Bps) {
    rate = Math.min(rate, (link.bandwidth_Bps * model.share) / RECORD_BYTES);
  }
  rate *= scale;
  const seconds = 1;
  const records = Math.round(rate * seconds);
  const bytesPerS = rate * RECORD_BYTES;
  return {
    run_id: runId,
    scenario: 'stream',
    link: link.name,
    layer,
    mode,
    records_per_msg: size,
    payload_bytes: size * RECORD_BYTES,
    concurrency: 1,
    batch_bytes: mode === 'batched' ? 65536 : null,
    record_bytes: RECORD_BYTES,
    seconds,
    messages: Math.max(1, Math.round(records / size)),
    records,
    bytes: records * RECORD_BYTES,
    records_per_s: rate,
    bytes_per_s: bytesPerS,
    link_share: link.bandwidth_Bps ? bytesPerS / link.bandwidth_Bps : null,
    lost: 0,
    failed: 0,
    error: null,
    cpu_s_per_gb: 1.5 / jitter(seed + 1),
    repeat,
  };
}

export function insertResult(row) {
  const columns = Object.keys(row);
  return `INSERT INTO results (${columns.join(', ')}) VALUES (${columns.map((c) => sql(row[c])).join(', ')});`;
}

// The environment a run records (schema 3); run.environment overrides members.
// A run may name its host (run.host, 'bench-host' by default) and the pid of
// the bench writing it (run.pid).
export const ENVIRONMENT = {
  cpu_model: 'Test CPU @ 2.00GHz',
  kernel: 'Linux 6.18.44 x86_64',
  compiler: 'GNU 12.2.0',
  build_type: 'RelWithDebInfo',
  tern_commit: 'c2712b9',
  env: JSON.stringify({ governor: 'performance', mem_total: '4028024 kB', cpus_allowed: 2, libc: '2.36' }),
};

export function insertRun(run) {
  const config = JSON.stringify({ quick: true, links: LINKS.map((l) => l.name), records: SIZES, repeat: run.repeats ?? 1 });
  const env = { ...ENVIRONMENT, ...(run.environment ?? {}) };
  const columns = ['id', 'started_at', 'finished_at', 'tern_version', 'host', 'cpu', 'cores', 'note', 'config', 'status', 'pid', ...Object.keys(env)];
  const values = [run.id, run.started_at, run.finished_at ?? null, '0.1.0', run.host ?? 'bench-host', 'x86_64 test cpu', 2, run.note, config, run.status ?? 'running', run.pid ?? null, ...Object.values(env)];
  const statements = [`INSERT INTO runs (${columns.join(', ')}) VALUES (${values.map(sql).join(', ')});`];
  for (const link of run.links ?? LINKS) {
    statements.push(`INSERT INTO links (run_id, name, bandwidth_Bps, rtt_ms) VALUES (${run.id}, ${sql(link.name)}, ${sql(link.bandwidth_Bps)}, ${link.rtt_ms});`);
  }
  return statements.join('\n');
}

// Every row of one run, in the order a bench measures them: per cell, its
// repeats with the layers interleaved. options: repeats (1), layers (LAYERS),
// seed (the run id: runs with one seed have the same samples).
export function cells(runId, scale = 1, links = LINKS, options = {}) {
  const { repeats = 1, layers = LAYERS, seed = runId } = options;
  const rows = [];
  let cell = seed * 1000;
  for (const link of links) {
    for (const mode of MODES) {
      for (const size of SIZES) {
        for (let repeat = 0; repeat < repeats; repeat++) {
          layers.forEach((layer, i) => rows.push(resultRow(runId, link, layer, mode, size, cell + i, scale, repeat)));
        }
        cell += layers.length;
      }
    }
  }
  return rows;
}

// How many cells the rows are (repeats of a cell count once).
export function cellCount(rows) {
  return new Set(rows.map((r) => `${r.scenario} ${r.link} ${r.layer} ${r.mode} ${r.records_per_msg}`)).size;
}

// A whole finished run: the run, its links, its results, its end. options as
// for cells(), plus environment (members of ENVIRONMENT to change).
export function finishedRun(id, note, scale = 1, options = {}) {
  const started = new Date(Date.UTC(2026, 11, 1, 9, 0, 0) + id * 3600e3).toISOString().replace(/\.\d+Z$/, 'Z');
  const finished = started.replace(/:00:00Z$/, ':00:40Z');
  return [
    'BEGIN;',
    insertRun({ id, started_at: started, note, repeats: options.repeats, environment: options.environment }),
    ...cells(id, scale, LINKS, options).map(insertResult),
    `UPDATE runs SET finished_at = ${sql(finished)}, status = 'finished' WHERE id = ${id};`,
    'COMMIT;',
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const file = process.argv[2];
  const count = Number(process.argv[3] ?? 3);
  const repeats = Number(process.argv[4] ?? 1);
  if (!file || !(count >= 0) || !(repeats >= 1)) {
    console.error('usage: node fixture.mjs FILE [RUNS] [REPEATS]');
    process.exit(2);
  }
  createDatabase(file);
  for (let id = 1; id <= count; id++) {
    runSqlite(file, finishedRun(id, id === 1 ? XSS_NOTE : `fixture run ${id}`, id === count && count > 2 ? 0.8 : 1, { repeats }));
  }
}
