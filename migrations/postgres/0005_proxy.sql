-- What proxy repositories fetched from their upstreams: the bytes (a blob) or a remembered 404/410.
CREATE TABLE proxy_cache (
    repository_id BIGINT NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    status INTEGER NOT NULL,
    sha256 TEXT,
    size BIGINT NOT NULL,
    content_type TEXT NOT NULL,
    upstream_etag TEXT,
    upstream_last_modified TEXT,
    fetched_at BIGINT NOT NULL,
    PRIMARY KEY (repository_id, path)
);

-- APT index pages read one component in id order, keeping its architecture and `all`: an ordered
-- range on this index. The per-architecture index it replaces let PostgreSQL re-scan and sort
-- the rest of the table for every page.
CREATE INDEX apt_packages_order ON apt_packages (repository_id, component, id);
DROP INDEX apt_packages_index;
