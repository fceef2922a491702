-- The checksum database (GOSUMDB) of each hosted and group Go repository: an append-only
-- transparency log of the go.sum lines of the module versions it serves.
-- The log's head: the database's name and Ed25519 note key (its private half sealed with
-- security.secret), how many records it holds, and the tree hash over them (hex). An append
-- locks this row, so appends serialise; the records and hashes never change once written.
CREATE TABLE go_sumdb_logs (
    repository_id BIGINT NOT NULL PRIMARY KEY,
    name VARCHAR(253) CHARACTER SET ascii NOT NULL,
    verifier_key VARCHAR(400) CHARACTER SET ascii NOT NULL,
    key_nonce VARCHAR(64) CHARACTER SET ascii NOT NULL,
    key_sealed VARCHAR(1000) CHARACTER SET ascii NOT NULL,
    size BIGINT NOT NULL,
    tree_hash CHAR(64) CHARACTER SET ascii NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    CONSTRAINT go_sumdb_logs_repo_fk FOREIGN KEY (repository_id) REFERENCES repositories (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
-- Record `id` of a log: one module version's two go.sum lines, as a lookup serves them. A
-- deleted version's record stays.
CREATE TABLE go_sumdb_records (
    repository_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    module VARCHAR(500) NOT NULL,
    version VARCHAR(200) NOT NULL,
    record TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (repository_id, id),
    UNIQUE KEY go_sumdb_records_coordinate (repository_id, module, version),
    CONSTRAINT go_sumdb_records_log_fk FOREIGN KEY (repository_id) REFERENCES go_sumdb_logs (repository_id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
-- The log's stored hashes (record and node hashes in the dense order of x/mod's tlog), hex.
CREATE TABLE go_sumdb_hashes (
    repository_id BIGINT NOT NULL,
    idx BIGINT NOT NULL,
    hash CHAR(64) CHARACTER SET ascii NOT NULL,
    PRIMARY KEY (repository_id, idx),
    CONSTRAINT go_sumdb_hashes_log_fk FOREIGN KEY (repository_id) REFERENCES go_sumdb_logs (repository_id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
