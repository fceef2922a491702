CREATE TABLE publication_units (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    repository_id INTEGER NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    unit_key TEXT NOT NULL,
    desired_revision INTEGER NOT NULL DEFAULT 0,
    published_revision INTEGER NOT NULL DEFAULT 0,
    current_snapshot_id INTEGER,
    first_pending_at INTEGER,
    last_change_at INTEGER,
    lease_owner TEXT,
    lease_token TEXT,
    lease_expires_at INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    last_published_at INTEGER,
    UNIQUE (repository_id, kind, unit_key)
);
CREATE INDEX publication_units_pending ON publication_units (next_attempt_at, first_pending_at);

CREATE TABLE snapshots (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    unit_id INTEGER NOT NULL REFERENCES publication_units (id) ON DELETE CASCADE,
    revision INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    superseded_at INTEGER
);
CREATE INDEX snapshots_unit ON snapshots (unit_id, id);

CREATE TABLE snapshot_files (
    snapshot_id INTEGER NOT NULL REFERENCES snapshots (id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    PRIMARY KEY (snapshot_id, path)
);
CREATE INDEX snapshot_files_blob ON snapshot_files (sha256);

CREATE TABLE outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    unit_id INTEGER NOT NULL REFERENCES publication_units (id) ON DELETE CASCADE,
    revision INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    delivered_at INTEGER
);
CREATE INDEX outbox_pending ON outbox (delivered_at, unit_id);

CREATE TABLE test_entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    unit_id INTEGER NOT NULL REFERENCES publication_units (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    body TEXT NOT NULL,
    UNIQUE (unit_id, name)
);

INSERT INTO watermarks (name, version) VALUES ('publications', 1);

-- Blobs written by publication builds may be collected once no snapshot refers to them;
-- every other blob (artifacts) is kept. An artifact upload of the same bytes upgrades the row.
ALTER TABLE blobs ADD COLUMN origin TEXT NOT NULL DEFAULT 'artifact';
