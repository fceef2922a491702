-- What proxy repositories fetched from their upstreams: the bytes (a blob) or a remembered 404/410.
CREATE TABLE proxy_cache (
    repository_id BIGINT NOT NULL,
    path VARCHAR(700) NOT NULL,
    status INT NOT NULL,
    sha256 CHAR(64) CHARACTER SET ascii NULL,
    size BIGINT NOT NULL,
    content_type VARCHAR(255) NOT NULL,
    upstream_etag VARCHAR(255) NULL,
    upstream_last_modified VARCHAR(64) NULL,
    fetched_at BIGINT NOT NULL,
    PRIMARY KEY (repository_id, path),
    CONSTRAINT proxy_cache_repo_fk FOREIGN KEY (repository_id) REFERENCES repositories (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- APT index pages read one component in id order, keeping its architecture and `all`: an ordered
-- range on this index. The per-architecture index it replaces let PostgreSQL re-scan and sort
-- the rest of the table for every page.
CREATE INDEX apt_packages_order ON apt_packages (repository_id, component, id);
ALTER TABLE apt_packages DROP INDEX apt_packages_index;
