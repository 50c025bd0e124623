-- The benchmark database as `tern bench` writes it (the SPEC's schema plus
-- the columns of user_version 2 and 3: the run's environment, results.repeat
-- for --repeat, results.rate for open-loop cells), for tests that need a
-- database before or without a real bench.
PRAGMA journal_mode = WAL;
CREATE TABLE runs (
  id           INTEGER PRIMARY KEY,
  started_at   TEXT NOT NULL,
  finished_at  TEXT,
  tern_version TEXT NOT NULL,
  host         TEXT, cpu TEXT, cores INTEGER,
  note         TEXT,
  config       TEXT NOT NULL,
  status       TEXT NOT NULL DEFAULT 'running',
  cpu_model    TEXT, kernel TEXT, compiler TEXT,
  build_type   TEXT, tern_commit TEXT,
  env          TEXT,
  pid          INTEGER
);
CREATE TABLE links (
  run_id        INTEGER NOT NULL REFERENCES runs(id),
  name          TEXT NOT NULL,
  bandwidth_Bps REAL,
  rtt_ms        REAL NOT NULL,
  PRIMARY KEY (run_id, name)
);
CREATE TABLE results (
  id              INTEGER PRIMARY KEY,
  run_id          INTEGER NOT NULL REFERENCES runs(id),
  scenario        TEXT NOT NULL,
  link            TEXT NOT NULL,
  layer           TEXT NOT NULL,
  mode            TEXT NOT NULL,
  records_per_msg INTEGER NOT NULL,
  payload_bytes   INTEGER NOT NULL,
  concurrency     INTEGER NOT NULL DEFAULT 1,
  batch_bytes     INTEGER,
  record_bytes    INTEGER NOT NULL,
  seconds         REAL NOT NULL,
  messages        INTEGER NOT NULL,
  records         INTEGER NOT NULL,
  bytes           INTEGER NOT NULL,
  records_per_s   REAL NOT NULL,
  bytes_per_s     REAL NOT NULL,
  link_share      REAL,
  lat_p50_us      REAL, lat_p99_us REAL, lat_p999_us REAL,
  lost            INTEGER NOT NULL DEFAULT 0,
  failed          INTEGER NOT NULL DEFAULT 0,
  error           TEXT,
  cpu_s_per_gb    REAL,
  spread          REAL,
  repeat          INTEGER NOT NULL DEFAULT 0,
  rate            REAL,
  keys            INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX results_run ON results(run_id);
PRAGMA user_version = 4;
