-- APK packages of hosted repositories. A unit is `<branch>/<channel>/<arch>`; `path` is
-- `<unit>/<name>-<version>.apk`; `record` is the package's APKINDEX record as published.
CREATE TABLE apk_packages (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    repository_id BIGINT NOT NULL,
    unit_key VARCHAR(200) NOT NULL,
    name VARCHAR(128) NOT NULL,
    version VARCHAR(128) NOT NULL,
    path VARCHAR(600) NOT NULL,
    record MEDIUMTEXT NOT NULL,
    checksum VARCHAR(64) CHARACTER SET ascii NOT NULL,
    size BIGINT NOT NULL,
    sha256 CHAR(64) CHARACTER SET ascii NOT NULL,
    uploaded_at BIGINT NOT NULL,
    uploaded_by VARCHAR(255) NOT NULL,
    UNIQUE KEY apk_packages_path (repository_id, path),
    KEY apk_packages_unit (repository_id, unit_key, id),
    CONSTRAINT apk_packages_repo_fk FOREIGN KEY (repository_id) REFERENCES repositories (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
