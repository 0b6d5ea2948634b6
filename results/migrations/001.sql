-- results.db, version 1: what `nimble-bench run` measures, one row per
-- figure. A new file gets every migration in order (001, 002, ...), an older
-- one the migrations above its PRAGMA user_version; docs/results.md
-- describes every table and column of the latest version.

-- One benchmark run: which commit, host and configuration produced it.
CREATE TABLE runs (
  id            INTEGER PRIMARY KEY,
  started_at    TEXT    NOT NULL,  -- ISO 8601, UTC
  finished_at   TEXT,              -- NULL while running or after a crash
  status        TEXT    NOT NULL CHECK (status IN ('running', 'done', 'failed')),
  error         TEXT,              -- why a failed run failed
  commit_id     TEXT    NOT NULL,  -- git commit of the nimble-bench binary
  host          TEXT    NOT NULL,  -- host name
  cpu_model     TEXT    NOT NULL,
  cpu_flags     TEXT    NOT NULL,  -- the vector extensions that matter (avx2 avx512f fma neon ...)
  cores         INTEGER NOT NULL,  -- logical CPUs of the host
  threads       INTEGER NOT NULL,  -- threads the run used
  target        TEXT    NOT NULL,  -- intel, arm or nvidia
  model         TEXT    NOT NULL,  -- lstm, treelstm or bert
  configuration TEXT    NOT NULL,  -- JSON: the model's options (layers, sizes, static length...)
  dataset       TEXT    NOT NULL,  -- a path, or "synthetic"
  split         TEXT    NOT NULL,
  sentences     INTEGER NOT NULL,
  warmup        INTEGER NOT NULL,
  repeat        INTEGER NOT NULL
);

-- One figure of a run, with its unit (docs/results.md lists the names).
CREATE TABLE measurements (
  id     INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  name   TEXT    NOT NULL,
  value  REAL    NOT NULL,
  unit   TEXT    NOT NULL,
  UNIQUE (run_id, name)
);

CREATE INDEX runs_by_model ON runs (model, target, started_at);
