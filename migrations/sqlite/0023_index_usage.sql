-- The bytes of the blobs a repository's retained index snapshots hold, each blob once (counted
-- with the rest of its usage).
ALTER TABLE repository_usage ADD COLUMN index_bytes INTEGER NOT NULL DEFAULT 0;
