-- A repository's named snapshots (#42): a point-in-time view that clients install from. A
-- snapshot is its file list — every index file its units had published and every file those
-- indexes list, each by its blob (nothing is copied) — under the paths clients ask for.
CREATE TABLE repository_snapshots (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    repository_id BIGINT NOT NULL,
    name VARCHAR(200) NOT NULL,
    created_at BIGINT NOT NULL,
    created_by VARCHAR(200),
    files BIGINT NOT NULL,
    bytes BIGINT NOT NULL,
    UNIQUE KEY repository_snapshots_name (repository_id, name),
    KEY repository_snapshots_time (repository_id, created_at),
    CONSTRAINT repository_snapshots_repo_fk FOREIGN KEY (repository_id) REFERENCES repositories (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- `namespace`, `name` and `version` name the component a listed file is an asset of, for the
-- diff; an index file has none.
CREATE TABLE repository_snapshot_files (
    snapshot_id BIGINT NOT NULL,
    path VARCHAR(700) NOT NULL,
    sha256 CHAR(64) CHARACTER SET ascii NOT NULL,
    size BIGINT NOT NULL,
    content_type VARCHAR(128) NOT NULL,
    namespace TEXT,
    name TEXT,
    version TEXT,
    PRIMARY KEY (snapshot_id, path),
    KEY repository_snapshot_files_blob (sha256),
    CONSTRAINT repository_snapshot_files_fk FOREIGN KEY (snapshot_id) REFERENCES repository_snapshots (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
