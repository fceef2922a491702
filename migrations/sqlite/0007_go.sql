-- Go module versions of hosted repositories: the zip and the .mod are blobs; `time_ms` is the
-- `.info` time (the publication time).
CREATE TABLE go_versions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    repository_id INTEGER NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    module TEXT NOT NULL,
    version TEXT NOT NULL,
    time_ms INTEGER NOT NULL,
    mod_sha256 TEXT NOT NULL,
    mod_size INTEGER NOT NULL,
    zip_sha256 TEXT NOT NULL,
    zip_size INTEGER NOT NULL,
    uploaded_by TEXT NOT NULL,
    UNIQUE (repository_id, module, version)
);
CREATE INDEX go_versions_module ON go_versions (repository_id, module, id);
