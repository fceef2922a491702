-- The test-only sample format (`debug.test_format`): a file per name and version, its bytes a
-- blob; `time_ms` is when it was uploaded.
CREATE TABLE sample_files (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    repository_id INTEGER NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    time_ms INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    uploaded_by TEXT NOT NULL,
    UNIQUE (repository_id, name, version)
);
