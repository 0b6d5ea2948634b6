-- Version 1 -> 2: runs say what executed them (architecture, emulation) and
-- which coordinator job and agent produced them; the coordinator's tables.
-- Version-1 rows keep arch 'unknown': what ran them was not recorded.
ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'run' CHECK (kind IN ('run', 'microbench'));
ALTER TABLE runs ADD COLUMN arch TEXT NOT NULL DEFAULT 'unknown';
ALTER TABLE runs ADD COLUMN emulated INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN emulator TEXT;
ALTER TABLE runs ADD COLUMN job_id INTEGER REFERENCES jobs (id);
ALTER TABLE runs ADD COLUMN agent TEXT;

-- The coordinator's queue: one row per job (docs/harness.md).
CREATE TABLE jobs (
  id            INTEGER PRIMARY KEY,
  kind          TEXT    NOT NULL,  -- run, microbench or probe
  target        TEXT    NOT NULL,  -- intel, arm, nvidia, or any
  spec          TEXT    NOT NULL,  -- JSON: the job's options and constraints
  state         TEXT    NOT NULL CHECK (state IN ('queued', 'leased', 'done', 'failed')),
  attempts      INTEGER NOT NULL DEFAULT 0,  -- leases handed out
  failures      INTEGER NOT NULL DEFAULT 0,  -- attempts that failed or were lost
  max_failures  INTEGER NOT NULL,  -- the job fails at this many
  agent         TEXT,              -- the lease's holder while leased
  lease_expires REAL,              -- unix seconds, while leased
  submitted_at  TEXT    NOT NULL,
  finished_at   TEXT,
  run_id        INTEGER REFERENCES runs (id),  -- the recorded run (run, microbench)
  result        TEXT,              -- JSON the agent reported (probe: the host)
  error         TEXT               -- a failed job: every attempt's reason
);
CREATE INDEX jobs_by_state ON jobs (state, id);

-- Every lease of a job: who held it and how it ended.
CREATE TABLE job_attempts (
  job_id      INTEGER NOT NULL REFERENCES jobs (id),
  attempt     INTEGER NOT NULL,  -- 1, 2, ...
  agent       TEXT    NOT NULL,
  started_at  TEXT    NOT NULL,
  finished_at TEXT,
  outcome     TEXT    NOT NULL
    CHECK (outcome IN ('running', 'done', 'failed', 'lost', 'released', 'superseded')),
  reason      TEXT,
  PRIMARY KEY (job_id, attempt)
);

-- Agents that have connected, with the hardware they reported themselves.
CREATE TABLE agents (
  name         TEXT    PRIMARY KEY,
  host         TEXT    NOT NULL,
  arch         TEXT    NOT NULL,
  emulated     INTEGER NOT NULL,
  emulator     TEXT,
  cpu_model    TEXT    NOT NULL,
  cpu_flags    TEXT    NOT NULL,
  cores        INTEGER NOT NULL,
  memory_bytes INTEGER NOT NULL,
  gpus         TEXT    NOT NULL,  -- GPU models, comma-separated; "" for none
  commit_id    TEXT    NOT NULL,
  slurm_job_id TEXT,              -- set when Slurm placed it
  first_seen   TEXT    NOT NULL,
  last_seen    TEXT    NOT NULL,
  state        TEXT    NOT NULL CHECK (state IN ('connected', 'disconnected'))
);

-- Agents launched through Slurm (`nimble-bench agents start --via slurm`).
CREATE TABLE launches (
  slurm_job_id TEXT PRIMARY KEY,
  launched_at  TEXT NOT NULL,
  options      TEXT NOT NULL,  -- JSON: count, constraint, gres, ...
  state        TEXT NOT NULL CHECK (state IN ('active', 'stopped'))
);
