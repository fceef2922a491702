-- The checksum database (GOSUMDB) of each hosted and group Go repository: an append-only
-- transparency log of the go.sum lines of the module versions it serves.
-- The log's head: the database's name and Ed25519 note key (its private half sealed with
-- security.secret), how many records it holds, and the tree hash over them (hex). An append
-- locks this row, so appends serialise; the records and hashes never change once written.
CREATE TABLE go_sumdb_logs (
    repository_id INTEGER PRIMARY KEY REFERENCES repositories (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    verifier_key TEXT NOT NULL,
    key_nonce TEXT NOT NULL,
    key_sealed TEXT NOT NULL,
    size INTEGER NOT NULL,
    tree_hash TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
-- Record `id` of a log: one module version's two go.sum lines, as a lookup serves them. A
-- deleted version's record stays.
CREATE TABLE go_sumdb_records (
    repository_id INTEGER NOT NULL REFERENCES go_sumdb_logs (repository_id) ON DELETE CASCADE,
    id INTEGER NOT NULL,
    module TEXT NOT NULL,
    version TEXT NOT NULL,
    record TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (repository_id, id),
    UNIQUE (repository_id, module, version)
);
-- The log's stored hashes (record and node hashes in the dense order of x/mod's tlog), hex.
CREATE TABLE go_sumdb_hashes (
    repository_id INTEGER NOT NULL REFERENCES go_sumdb_logs (repository_id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (repository_id, idx)
);
