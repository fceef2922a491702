-- APK packages of hosted repositories. A unit is `<branch>/<channel>/<arch>`; `path` is
-- `<unit>/<name>-<version>.apk`; `record` is the package's APKINDEX record as published.
CREATE TABLE apk_packages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    repository_id INTEGER NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    unit_key TEXT NOT NULL,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    path TEXT NOT NULL,
    record TEXT NOT NULL,
    checksum TEXT NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    uploaded_at INTEGER NOT NULL,
    uploaded_by TEXT NOT NULL,
    UNIQUE (repository_id, path)
);
CREATE INDEX apk_packages_unit ON apk_packages (repository_id, unit_key, id);
