-- Rollback (#42): a hosted repository's publication unit (an APT distribution, an APK branch)
-- pointed at one of its snapshots publishes that snapshot's index files again, signed anew,
-- until it is pointed back. A snapshot remembers which unit each index file was published by
-- and under which path, so that the unit's files can be read back from it, and the catalogue
-- key and time of the component each asset belongs to (what an export of the snapshot names).
ALTER TABLE repository_snapshot_files ADD COLUMN unit_id BIGINT NULL, ADD COLUMN unit_path VARCHAR(700) NULL, ADD COLUMN component_key TEXT NULL, ADD COLUMN component_created_at BIGINT NULL, ADD KEY repository_snapshot_files_unit (snapshot_id, unit_id);

CREATE TABLE unit_pins (
    unit_id BIGINT NOT NULL PRIMARY KEY,
    snapshot_id BIGINT NOT NULL,
    pinned_at BIGINT NOT NULL,
    pinned_by VARCHAR(200),
    KEY unit_pins_snapshot (snapshot_id),
    CONSTRAINT unit_pins_unit_fk FOREIGN KEY (unit_id) REFERENCES publication_units (id) ON DELETE CASCADE,
    CONSTRAINT unit_pins_snapshot_fk FOREIGN KEY (snapshot_id) REFERENCES repository_snapshots (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
