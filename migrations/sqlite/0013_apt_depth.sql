-- APT depth: a hosted repository publishes several distributions, each listing the packages
-- uploaded to it (a package in two distributions is one row and one blob, two memberships), and
-- source packages: a .dsc with the files it lists, each a pool file, published as Sources.
CREATE TABLE apt_distribution_packages (
    package_id INTEGER NOT NULL REFERENCES apt_packages (id) ON DELETE CASCADE,
    repository_id INTEGER NOT NULL,
    distribution TEXT NOT NULL,
    PRIMARY KEY (package_id, distribution)
);
CREATE INDEX apt_distribution_packages_index ON apt_distribution_packages (repository_id, distribution, package_id);
-- Until now every package of a hosted repository was in its one distribution.
INSERT INTO apt_distribution_packages (package_id, repository_id, distribution)
SELECT p.id, p.repository_id, COALESCE(json_extract(r.settings, '$.apt.distribution'), 'stable')
FROM apt_packages p JOIN repositories r ON r.id = p.repository_id;

CREATE TABLE apt_sources (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    repository_id INTEGER NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    component TEXT NOT NULL,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    control TEXT NOT NULL,
    directory TEXT NOT NULL,
    dsc_path TEXT NOT NULL,
    uploaded_at INTEGER NOT NULL,
    uploaded_by TEXT NOT NULL,
    UNIQUE (repository_id, name, version)
);
CREATE UNIQUE INDEX apt_sources_dsc ON apt_sources (repository_id, dsc_path);
CREATE INDEX apt_sources_index ON apt_sources (repository_id, component, id);
CREATE TABLE apt_source_files (
    source_id INTEGER NOT NULL REFERENCES apt_sources (id) ON DELETE CASCADE,
    repository_id INTEGER NOT NULL,
    position INTEGER NOT NULL,
    pool_path TEXT NOT NULL,
    size INTEGER NOT NULL,
    md5 TEXT NOT NULL,
    sha1 TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    uploaded_at INTEGER NOT NULL,
    PRIMARY KEY (source_id, position)
);
CREATE INDEX apt_source_files_path ON apt_source_files (repository_id, pool_path);
CREATE INDEX apt_source_files_blob ON apt_source_files (sha256);
CREATE TABLE apt_distribution_sources (
    source_id INTEGER NOT NULL REFERENCES apt_sources (id) ON DELETE CASCADE,
    repository_id INTEGER NOT NULL,
    distribution TEXT NOT NULL,
    PRIMARY KEY (source_id, distribution)
);
CREATE INDEX apt_distribution_sources_index ON apt_distribution_sources (repository_id, distribution, source_id);
