-- Rollback (#42): a hosted repository's publication unit (an APT distribution, an APK branch)
-- pointed at one of its snapshots publishes that snapshot's index files again, signed anew,
-- until it is pointed back. A snapshot remembers which unit each index file was published by
-- and under which path, so that the unit's files can be read back from it.
ALTER TABLE repository_snapshot_files ADD COLUMN unit_id INTEGER;
ALTER TABLE repository_snapshot_files ADD COLUMN unit_path VARCHAR(700);
-- The catalogue key and time of the component a listed file is an asset of (what an export of
-- the snapshot names).
ALTER TABLE repository_snapshot_files ADD COLUMN component_key TEXT;
ALTER TABLE repository_snapshot_files ADD COLUMN component_created_at INTEGER;
CREATE INDEX repository_snapshot_files_unit ON repository_snapshot_files (snapshot_id, unit_id);

CREATE TABLE unit_pins (
    unit_id INTEGER PRIMARY KEY REFERENCES publication_units (id) ON DELETE CASCADE,
    snapshot_id INTEGER NOT NULL REFERENCES repository_snapshots (id) ON DELETE CASCADE,
    pinned_at INTEGER NOT NULL,
    pinned_by VARCHAR(200)
);
CREATE INDEX unit_pins_snapshot ON unit_pins (snapshot_id);
