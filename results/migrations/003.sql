-- Version 2 -> 3: runs of the peer frameworks (`nimble-bench baseline`)
-- beside Nimble's own, and why a committed gate baseline last changed.

-- Which system produced the run's figures; a peer's variant and version
-- are in its configuration. Earlier rows are Nimble's.
ALTER TABLE runs ADD COLUMN framework TEXT NOT NULL DEFAULT 'nimble'
  CHECK (framework IN ('nimble', 'pytorch', 'onnxruntime'));

-- One row per `nimble-bench gate --update-baseline`: a baseline changes
-- only by that command, which says why.
CREATE TABLE baseline_updates (
  id         INTEGER PRIMARY KEY,
  updated_at TEXT    NOT NULL,  -- ISO 8601, UTC
  commit_id  TEXT    NOT NULL,  -- the nimble-bench that wrote it
  source     TEXT    NOT NULL,  -- the results database the runs came from
  runs       INTEGER NOT NULL,  -- runs copied in
  reason     TEXT    NOT NULL
);
