CREATE TABLE apt_packages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    repository_id INTEGER NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    component TEXT NOT NULL,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    architecture TEXT NOT NULL,
    control TEXT NOT NULL,
    pool_path TEXT NOT NULL,
    size INTEGER NOT NULL,
    md5 TEXT NOT NULL,
    sha1 TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    sha512 TEXT NOT NULL,
    uploaded_at INTEGER NOT NULL,
    uploaded_by TEXT NOT NULL,
    UNIQUE (repository_id, name, version, architecture)
);
CREATE UNIQUE INDEX apt_packages_pool ON apt_packages (repository_id, pool_path);
CREATE INDEX apt_packages_index ON apt_packages (repository_id, component, architecture, id);
