// fixture.mjs: benchmark databases with realistic rows, written through the
// sqlite3 command-line tool, for the dashboard's tests. The figures follow a
// simple model (a per-message cost, capped by the link's bandwidth) with a
// seeded jitter, so two runs differ a little, like real ones.
//
// As a command: node fixture.mjs FILE [RUNS]  (writes RUNS finished runs)

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

function jitter(seed) {
  const x = Math.sin(seed * 12.9898) * 43758.5453;
  return 0.9 + 0.2 * (x - Math.floor(x));
}

// One result row: records/s from a per-message cost, capped by the link.
export function resultRow(runId, link, layer, mode, size, seed, scale = 1) {
  const perMessage = mode === 'lowlat' ? 4e-6 : 1.2e-6;
  const perRecord = layer === 'tern' ? 45e-9 : 40e-9;
  let rate = (size / (perMessage + size * perRecord)) * jitter(seed) * scale;
  if (link.bandwidth_Bps) {
    rate = Math.min(rate, (link.bandwidth_Bps * (layer === 'tern' ? 0.94 : 0.97)) / RECORD_BYTES);
  }
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
  };
}

export function insertResult(row) {
  const columns = Object.keys(row);
  return `INSERT INTO results (${columns.join(', ')}) VALUES (${columns.map((c) => sql(row[c])).join(', ')});`;
}

export function insertRun(run) {
  const config = JSON.stringify({ quick: true, links: LINKS.map((l) => l.name), records: SIZES });
  const statements = [
    `INSERT INTO runs (id, started_at, finished_at, tern_version, host, cpu, cores, note, config, status) VALUES (${sql(run.id)}, ${sql(run.started_at)}, ${sql(run.finished_at ?? null)}, '0.1.0', 'bench-host', 'x86_64 test cpu', 2, ${sql(run.note)}, ${sql(config)}, ${sql(run.status ?? 'running')});`,
  ];
  for (const link of run.links ?? LINKS) {
    statements.push(`INSERT INTO links (run_id, name, bandwidth_Bps, rtt_ms) VALUES (${run.id}, ${sql(link.name)}, ${sql(link.bandwidth_Bps)}, ${link.rtt_ms});`);
  }
  return statements.join('\n');
}

// Every cell of one run, in the order a bench measures them.
export function cells(runId, scale = 1, links = LINKS) {
  const rows = [];
  let seed = runId * 1000;
  for (const link of links) {
    for (const layer of LAYERS) {
      for (const mode of MODES) {
        for (const size of SIZES) {
          rows.push(resultRow(runId, link, layer, mode, size, seed++, scale));
        }
      }
    }
  }
  return rows;
}

// A whole finished run: the run, its links, its results, its end.
export function finishedRun(id, note, scale = 1) {
  const started = new Date(Date.UTC(2026, 11, 1, 9, 0, 0) + id * 3600e3).toISOString().replace(/\.\d+Z$/, 'Z');
  const finished = started.replace(/:00:00Z$/, ':00:40Z');
  return [
    'BEGIN;',
    insertRun({ id, started_at: started, note }),
    ...cells(id, scale).map(insertResult),
    `UPDATE runs SET finished_at = ${sql(finished)}, status = 'finished' WHERE id = ${id};`,
    'COMMIT;',
  ].join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const file = process.argv[2];
  const count = Number(process.argv[3] ?? 3);
  if (!file || !(count >= 0)) {
    console.error('usage: node fixture.mjs FILE [RUNS]');
    process.exit(2);
  }
  createDatabase(file);
  for (let id = 1; id <= count; id++) {
    runSqlite(file, finishedRun(id, id === 1 ? XSS_NOTE : `fixture run ${id}`, id === count && count > 2 ? 0.8 : 1));
  }
}
