-- The test-only sample format (`debug.test_format`): a file per name and version, its bytes a
-- blob; `time_ms` is when it was uploaded.
CREATE TABLE sample_files (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    repository_id BIGINT NOT NULL,
    name VARCHAR(200) NOT NULL,
    version VARCHAR(100) NOT NULL,
    time_ms BIGINT NOT NULL,
    sha256 CHAR(64) CHARACTER SET ascii NOT NULL,
    size BIGINT NOT NULL,
    uploaded_by VARCHAR(255) NOT NULL,
    UNIQUE KEY sample_files_coordinate (repository_id, name, version),
    CONSTRAINT sample_files_repo_fk FOREIGN KEY (repository_id) REFERENCES repositories (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
