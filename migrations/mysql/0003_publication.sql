CREATE TABLE publication_units (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    repository_id BIGINT NOT NULL,
    kind VARCHAR(32) NOT NULL,
    unit_key VARCHAR(255) NOT NULL,
    desired_revision BIGINT NOT NULL DEFAULT 0,
    published_revision BIGINT NOT NULL DEFAULT 0,
    current_snapshot_id BIGINT,
    first_pending_at BIGINT,
    last_change_at BIGINT,
    lease_owner VARCHAR(255),
    lease_token VARCHAR(64),
    lease_expires_at BIGINT,
    attempts BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL DEFAULT 0,
    last_error VARCHAR(2000),
    last_published_at BIGINT,
    UNIQUE KEY publication_units_key (repository_id, kind, unit_key),
    KEY publication_units_pending (next_attempt_at, first_pending_at),
    CONSTRAINT publication_units_repo_fk FOREIGN KEY (repository_id) REFERENCES repositories (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE snapshots (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    unit_id BIGINT NOT NULL,
    revision BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    superseded_at BIGINT,
    KEY snapshots_unit (unit_id, id),
    CONSTRAINT snapshots_unit_fk FOREIGN KEY (unit_id) REFERENCES publication_units (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE snapshot_files (
    snapshot_id BIGINT NOT NULL,
    path VARCHAR(700) NOT NULL,
    sha256 CHAR(64) CHARACTER SET ascii NOT NULL,
    size BIGINT NOT NULL,
    content_type VARCHAR(128) NOT NULL,
    PRIMARY KEY (snapshot_id, path),
    KEY snapshot_files_blob (sha256),
    CONSTRAINT snapshot_files_snapshot_fk FOREIGN KEY (snapshot_id) REFERENCES snapshots (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE outbox (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    unit_id BIGINT NOT NULL,
    revision BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    delivered_at BIGINT,
    KEY outbox_pending (delivered_at, unit_id),
    CONSTRAINT outbox_unit_fk FOREIGN KEY (unit_id) REFERENCES publication_units (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE test_entries (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    unit_id BIGINT NOT NULL,
    name VARCHAR(255) NOT NULL,
    body MEDIUMTEXT NOT NULL,
    UNIQUE KEY test_entries_name (unit_id, name),
    CONSTRAINT test_entries_unit_fk FOREIGN KEY (unit_id) REFERENCES publication_units (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT INTO watermarks (name, version) VALUES ('publications', 1);

-- Blobs written by publication builds may be collected once no snapshot refers to them;
-- every other blob (artifacts) is kept. An artifact upload of the same bytes upgrades the row.
ALTER TABLE blobs ADD COLUMN origin VARCHAR(16) NOT NULL DEFAULT 'artifact';
