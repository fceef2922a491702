-- Conan recipe revisions (pkgid = prev = '') and package revisions of hosted repositories; a
-- revision is `complete` once its conanmanifest.txt arrived and matched. Files are blobs.
CREATE TABLE conan_revisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    repository_id INTEGER NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    reference TEXT NOT NULL,
    rrev TEXT NOT NULL,
    pkgid TEXT NOT NULL,
    prev TEXT NOT NULL,
    complete INTEGER NOT NULL,
    time_ms INTEGER NOT NULL,
    UNIQUE (repository_id, reference, rrev, pkgid, prev)
);
CREATE TABLE conan_files (
    revision_id INTEGER NOT NULL REFERENCES conan_revisions (id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    md5 TEXT NOT NULL,
    sha1 TEXT NOT NULL,
    PRIMARY KEY (revision_id, path)
);
