-- The catalogue: every stored artifact as a component (what people search for: group, name,
-- version) with its assets (the files a client downloads, by their path under the repository).
-- Written in the transaction of the format's own rows (hosted) or with the cached file (proxy).
-- `component_key` is the format's own name for the component in the repository.
CREATE TABLE components (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    repository_id BIGINT NOT NULL,
    format VARCHAR(16) NOT NULL,
    component_key VARCHAR(700) NOT NULL,
    namespace VARCHAR(500) NOT NULL,
    name VARCHAR(500) NOT NULL,
    version VARCHAR(200) NOT NULL,
    created_at BIGINT NOT NULL,
    uploaded_by VARCHAR(255) NOT NULL,
    UNIQUE KEY components_key (repository_id, component_key),
    KEY components_repository (repository_id, id),
    KEY components_name (name, id),
    KEY components_version (version, id),
    KEY components_namespace (namespace, id),
    KEY components_repository_name (repository_id, name, id),
    KEY components_repository_version (repository_id, version, id),
    KEY components_repository_namespace (repository_id, namespace, id),
    CONSTRAINT components_repo_fk FOREIGN KEY (repository_id) REFERENCES repositories (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
-- The words a keyword search (`q`) finds a component by: its name, group and version, whole and
-- split at punctuation, lower-cased.
CREATE TABLE component_keywords (
    keyword VARCHAR(500) NOT NULL,
    component_id BIGINT NOT NULL,
    PRIMARY KEY (keyword, component_id),
    KEY component_keywords_component (component_id),
    CONSTRAINT component_keywords_fk FOREIGN KEY (component_id) REFERENCES components (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE assets (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    repository_id BIGINT NOT NULL,
    component_id BIGINT NOT NULL,
    path VARCHAR(700) NOT NULL,
    sha256 CHAR(64) CHARACTER SET ascii NOT NULL,
    sha1 CHAR(40) CHARACTER SET ascii,
    md5 CHAR(32) CHARACTER SET ascii,
    size BIGINT NOT NULL,
    content_type VARCHAR(255) NOT NULL,
    created_at BIGINT NOT NULL,
    uploaded_by VARCHAR(255) NOT NULL,
    last_downloaded BIGINT,
    download_count BIGINT NOT NULL DEFAULT 0,
    UNIQUE KEY assets_path (repository_id, path),
    KEY assets_component (component_id, id),
    KEY assets_repository (repository_id, id),
    KEY assets_sha256 (sha256),
    CONSTRAINT assets_repo_fk FOREIGN KEY (repository_id) REFERENCES repositories (id) ON DELETE CASCADE,
    CONSTRAINT assets_component_fk FOREIGN KEY (component_id) REFERENCES components (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
-- What each repository holds, as the worker last counted it from the catalogue.
CREATE TABLE repository_usage (
    repository_id BIGINT NOT NULL PRIMARY KEY,
    components BIGINT NOT NULL,
    bytes BIGINT NOT NULL,
    refreshed_at BIGINT NOT NULL,
    CONSTRAINT repository_usage_fk FOREIGN KEY (repository_id) REFERENCES repositories (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
-- One-time tasks over existing data that need a format's code (the catalogue's backfill), done
-- once by the first process that starts after the migration.
CREATE TABLE maintenance (
    name VARCHAR(100) NOT NULL PRIMARY KEY,
    done_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
