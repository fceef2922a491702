-- APT depth: a hosted repository publishes several distributions, each listing the packages
-- uploaded to it (a package in two distributions is one row and one blob, two memberships), and
-- source packages: a .dsc with the files it lists, each a pool file, published as Sources.
CREATE TABLE apt_distribution_packages (
    package_id BIGINT NOT NULL,
    repository_id BIGINT NOT NULL,
    distribution VARCHAR(64) NOT NULL,
    PRIMARY KEY (package_id, distribution),
    KEY apt_distribution_packages_index (repository_id, distribution, package_id),
    CONSTRAINT apt_distribution_packages_fk FOREIGN KEY (package_id) REFERENCES apt_packages (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
-- Until now every package of a hosted repository was in its one distribution.
INSERT INTO apt_distribution_packages (package_id, repository_id, distribution)
SELECT p.id, p.repository_id, COALESCE(JSON_UNQUOTE(JSON_EXTRACT(r.settings, '$.apt.distribution')), 'stable')
FROM apt_packages p JOIN repositories r ON r.id = p.repository_id;

CREATE TABLE apt_sources (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    repository_id BIGINT NOT NULL,
    component VARCHAR(64) NOT NULL,
    name VARCHAR(128) NOT NULL,
    version VARCHAR(256) NOT NULL,
    control MEDIUMTEXT NOT NULL,
    directory VARCHAR(400) NOT NULL,
    dsc_path VARCHAR(700) NOT NULL,
    uploaded_at BIGINT NOT NULL,
    uploaded_by VARCHAR(255) NOT NULL,
    UNIQUE KEY apt_sources_coordinate (repository_id, name, version),
    UNIQUE KEY apt_sources_dsc (repository_id, dsc_path),
    KEY apt_sources_index (repository_id, component, id),
    CONSTRAINT apt_sources_repo_fk FOREIGN KEY (repository_id) REFERENCES repositories (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE apt_source_files (
    source_id BIGINT NOT NULL,
    repository_id BIGINT NOT NULL,
    position INTEGER NOT NULL,
    pool_path VARCHAR(700) NOT NULL,
    size BIGINT NOT NULL,
    md5 CHAR(32) CHARACTER SET ascii NOT NULL,
    sha1 CHAR(40) CHARACTER SET ascii NOT NULL,
    sha256 CHAR(64) CHARACTER SET ascii NOT NULL,
    uploaded_at BIGINT NOT NULL,
    PRIMARY KEY (source_id, position),
    KEY apt_source_files_path (repository_id, pool_path),
    KEY apt_source_files_blob (sha256),
    CONSTRAINT apt_source_files_fk FOREIGN KEY (source_id) REFERENCES apt_sources (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE apt_distribution_sources (
    source_id BIGINT NOT NULL,
    repository_id BIGINT NOT NULL,
    distribution VARCHAR(64) NOT NULL,
    PRIMARY KEY (source_id, distribution),
    KEY apt_distribution_sources_index (repository_id, distribution, source_id),
    CONSTRAINT apt_distribution_sources_fk FOREIGN KEY (source_id) REFERENCES apt_sources (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
