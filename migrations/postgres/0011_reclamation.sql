-- Cleanup runs (the status of each policy on each repository, and "run now" requests), the
-- lease that lets one run at a time work on a repository, and what artifact blob reclamation
-- needs: when a blob was found referenced by nothing, and indexes to look for references. And
-- the Last-Modified a unit's files carry: a whole second no earlier snapshot of the unit had.
CREATE TABLE cleanup_runs (
    policy_id BIGINT NOT NULL REFERENCES cleanup_policies (id) ON DELETE CASCADE,
    repository_id BIGINT NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    requested_at BIGINT,
    requested_by TEXT,
    started_at BIGINT,
    finished_at BIGINT,
    duration_ms BIGINT,
    components BIGINT NOT NULL DEFAULT 0,
    bytes BIGINT NOT NULL DEFAULT 0,
    error TEXT,
    PRIMARY KEY (policy_id, repository_id)
);
CREATE TABLE cleanup_leases (
    repository_id BIGINT PRIMARY KEY REFERENCES repositories (id) ON DELETE CASCADE,
    policy_id BIGINT,
    owner TEXT,
    token TEXT,
    expires_at BIGINT NOT NULL DEFAULT 0
);
ALTER TABLE blobs ADD COLUMN released_at BIGINT;
CREATE INDEX blobs_released ON blobs (released_at);
CREATE INDEX apt_packages_blob ON apt_packages (sha256);
CREATE INDEX apk_packages_blob ON apk_packages (sha256);
CREATE INDEX go_versions_mod_blob ON go_versions (mod_sha256);
CREATE INDEX go_versions_zip_blob ON go_versions (zip_sha256);
CREATE INDEX conan_files_blob ON conan_files (sha256);
CREATE INDEX proxy_cache_blob ON proxy_cache (sha256);

ALTER TABLE publication_units ADD COLUMN modified_at BIGINT;
