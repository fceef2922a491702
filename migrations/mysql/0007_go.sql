-- Go module versions of hosted repositories: the zip and the .mod are blobs; `time_ms` is the
-- `.info` time (the publication time).
CREATE TABLE go_versions (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    repository_id BIGINT NOT NULL,
    module VARCHAR(500) NOT NULL,
    version VARCHAR(200) NOT NULL,
    time_ms BIGINT NOT NULL,
    mod_sha256 CHAR(64) CHARACTER SET ascii NOT NULL,
    mod_size BIGINT NOT NULL,
    zip_sha256 CHAR(64) CHARACTER SET ascii NOT NULL,
    zip_size BIGINT NOT NULL,
    uploaded_by VARCHAR(255) NOT NULL,
    UNIQUE KEY go_versions_coordinate (repository_id, module, version),
    KEY go_versions_module (repository_id, module, id),
    CONSTRAINT go_versions_repo_fk FOREIGN KEY (repository_id) REFERENCES repositories (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
