-- A repository's named snapshots (#42): a point-in-time view that clients install from. A
-- snapshot is its file list — every index file its units had published and every file those
-- indexes list, each by its blob (nothing is copied) — under the paths clients ask for.
CREATE TABLE repository_snapshots (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    repository_id INTEGER NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    name VARCHAR(200) NOT NULL,
    created_at INTEGER NOT NULL,
    created_by VARCHAR(200),
    files INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    UNIQUE (repository_id, name)
);
CREATE INDEX repository_snapshots_time ON repository_snapshots (repository_id, created_at);

-- `namespace`, `name` and `version` name the component a listed file is an asset of, for the
-- diff; an index file has none.
CREATE TABLE repository_snapshot_files (
    snapshot_id INTEGER NOT NULL REFERENCES repository_snapshots (id) ON DELETE CASCADE,
    path VARCHAR(700) NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    content_type VARCHAR(128) NOT NULL,
    namespace TEXT,
    name TEXT,
    version TEXT,
    PRIMARY KEY (snapshot_id, path)
);
CREATE INDEX repository_snapshot_files_blob ON repository_snapshot_files (sha256);
