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
