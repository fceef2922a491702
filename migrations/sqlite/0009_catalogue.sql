-- The catalogue: every stored artifact as a component (what people search for: group, name,
-- version) with its assets (the files a client downloads, by their path under the repository).
-- Written in the transaction of the format's own rows (hosted) or with the cached file (proxy).
-- `component_key` is the format's own name for the component in the repository.
CREATE TABLE components (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    repository_id INTEGER NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    format TEXT NOT NULL,
    component_key TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    uploaded_by TEXT NOT NULL,
    UNIQUE (repository_id, component_key)
);
CREATE INDEX components_repository ON components (repository_id, id);
CREATE INDEX components_name ON components (name, id);
CREATE INDEX components_version ON components (version, id);
CREATE INDEX components_namespace ON components (namespace, id);
-- A search within a repository by name, version or group reads its range in id order.
CREATE INDEX components_repository_name ON components (repository_id, name, id);
CREATE INDEX components_repository_version ON components (repository_id, version, id);
CREATE INDEX components_repository_namespace ON components (repository_id, namespace, id);
-- The words a keyword search (`q`) finds a component by: its name, group and version, whole and
-- split at punctuation, lower-cased.
CREATE TABLE component_keywords (
    keyword TEXT NOT NULL,
    component_id INTEGER NOT NULL REFERENCES components (id) ON DELETE CASCADE,
    PRIMARY KEY (keyword, component_id)
);
CREATE INDEX component_keywords_component ON component_keywords (component_id);
CREATE TABLE assets (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    repository_id INTEGER NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    component_id INTEGER NOT NULL REFERENCES components (id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    sha1 TEXT,
    md5 TEXT,
    size INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    uploaded_by TEXT NOT NULL,
    last_downloaded INTEGER,
    download_count INTEGER NOT NULL DEFAULT 0,
    UNIQUE (repository_id, path)
);
CREATE INDEX assets_component ON assets (component_id, id);
CREATE INDEX assets_repository ON assets (repository_id, id);
CREATE INDEX assets_sha256 ON assets (sha256);
-- What each repository holds, as the worker last counted it from the catalogue.
CREATE TABLE repository_usage (
    repository_id INTEGER PRIMARY KEY REFERENCES repositories (id) ON DELETE CASCADE,
    components INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    refreshed_at INTEGER NOT NULL
);
-- One-time tasks over existing data that need a format's code (the catalogue's backfill), done
-- once by the first process that starts after the migration.
CREATE TABLE maintenance (
    name TEXT PRIMARY KEY,
    done_at INTEGER NOT NULL
);
