-- Cleanup runs (the status of each policy on each repository, and "run now" requests), the
-- lease that lets one run at a time work on a repository, and what artifact blob reclamation
-- needs: when a blob was found referenced by nothing, and indexes to look for references. And
-- the Last-Modified a unit's files carry: a whole second no earlier snapshot of the unit had.
CREATE TABLE cleanup_runs (
    policy_id BIGINT NOT NULL,
    repository_id BIGINT NOT NULL,
    requested_at BIGINT NULL,
    requested_by VARCHAR(255) NULL,
    started_at BIGINT NULL,
    finished_at BIGINT NULL,
    duration_ms BIGINT NULL,
    components BIGINT NOT NULL DEFAULT 0,
    bytes BIGINT NOT NULL DEFAULT 0,
    error TEXT NULL,
    PRIMARY KEY (policy_id, repository_id),
    KEY cleanup_runs_repository (repository_id),
    CONSTRAINT cleanup_runs_policy FOREIGN KEY (policy_id) REFERENCES cleanup_policies (id) ON DELETE CASCADE,
    CONSTRAINT cleanup_runs_repo FOREIGN KEY (repository_id) REFERENCES repositories (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE cleanup_leases (
    repository_id BIGINT NOT NULL PRIMARY KEY,
    policy_id BIGINT NULL,
    owner VARCHAR(255) NULL,
    token VARCHAR(64) NULL,
    expires_at BIGINT NOT NULL DEFAULT 0,
    CONSTRAINT cleanup_leases_repo FOREIGN KEY (repository_id) REFERENCES repositories (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
ALTER TABLE blobs ADD COLUMN released_at BIGINT NULL;
CREATE INDEX blobs_released ON blobs (released_at);
CREATE INDEX apt_packages_blob ON apt_packages (sha256);
CREATE INDEX apk_packages_blob ON apk_packages (sha256);
CREATE INDEX go_versions_mod_blob ON go_versions (mod_sha256);
CREATE INDEX go_versions_zip_blob ON go_versions (zip_sha256);
CREATE INDEX conan_files_blob ON conan_files (sha256);
CREATE INDEX proxy_cache_blob ON proxy_cache (sha256);

ALTER TABLE publication_units ADD COLUMN modified_at BIGINT NULL;
