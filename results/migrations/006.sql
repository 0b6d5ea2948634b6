-- Version 5 -> 6: agents placed through ssh (`nimble-bench agents start --via
-- ssh`) beside those placed by Slurm. A launch gets an id of its own and says
-- which engine placed it; an ssh launch says where it runs and how to stop
-- it (its systemd unit, or its pid on the host). Slurm launches keep their
-- job ids, which stay unique.

-- SQLite cannot change a table's key: the table is made anew, given the old
-- one's rows (in the order they were recorded), and takes its name.
CREATE TABLE launches_v6 (
  id           INTEGER PRIMARY KEY,
  via          TEXT    NOT NULL CHECK (via IN ('slurm', 'ssh')),
  slurm_job_id TEXT    UNIQUE,   -- via slurm: the batch job
  host         TEXT,             -- via ssh: the ssh destination, [user@]host
  agent        TEXT,             -- via ssh: the agent's name (Slurm's name themselves HOST-slurmJOB)
  unit         TEXT,             -- via ssh under systemd: the agent's transient unit
  pid          INTEGER,          -- via ssh under nohup: the agent's pid on the host
  remote_dir   TEXT,             -- via ssh: where the agent bundle was unpacked
  launched_at  TEXT    NOT NULL,
  options      TEXT    NOT NULL,  -- JSON: what `agents start` was given
  state        TEXT    NOT NULL CHECK (state IN ('active', 'stopped')),
  stopped_at   TEXT,              -- when `agents stop` took it (NULL for earlier rows)
  CHECK ((via = 'slurm') = (slurm_job_id IS NOT NULL)),
  CHECK (via = 'slurm' OR (host IS NOT NULL AND agent IS NOT NULL AND remote_dir IS NOT NULL AND
                           (unit IS NULL) <> (pid IS NULL)))
);
INSERT INTO launches_v6 (via, slurm_job_id, launched_at, options, state)
  SELECT 'slurm', slurm_job_id, launched_at, options, state FROM launches ORDER BY rowid;
DROP TABLE launches;
ALTER TABLE launches_v6 RENAME TO launches;
