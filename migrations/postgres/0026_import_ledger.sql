-- What `packyard-api import` copied: one row per item of a source (a package file, a module
-- version, a recipe revision) per repository, written once the item is stored, with the
-- SHA-256 it had (`checksum`: a record, not a reference that keeps a blob). A later run copies
-- only what is not here (or changed); a run after a crash goes on from here. `id` is the
-- SHA-256 of repository, source and item (keys too long to index).
CREATE TABLE import_ledger (
    id CHAR(64) PRIMARY KEY,
    repository_id BIGINT NOT NULL,
    source VARCHAR(2000) NOT NULL,
    item VARCHAR(2000) NOT NULL,
    checksum VARCHAR(2000) NOT NULL,
    size BIGINT NOT NULL,
    imported_at BIGINT NOT NULL
);
CREATE INDEX import_ledger_source ON import_ledger (repository_id, imported_at);
