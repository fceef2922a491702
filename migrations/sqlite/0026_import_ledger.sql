-- What `packyard-api import` copied: one row per item of a source (a package file, a module
-- version, a recipe revision) per repository, written once the item is stored, with the
-- SHA-256 it had (`checksum`: a record, not a reference that keeps a blob). A later run copies
-- only what is not here (or changed); a run after a crash goes on from here. `id` is the
-- SHA-256 of repository, source and item (keys too long to index).
CREATE TABLE import_ledger (
    id TEXT PRIMARY KEY,
    repository_id INTEGER NOT NULL,
    source TEXT NOT NULL,
    item TEXT NOT NULL,
    checksum TEXT NOT NULL,
    size INTEGER NOT NULL,
    imported_at INTEGER NOT NULL
);
CREATE INDEX import_ledger_source ON import_ledger (repository_id, imported_at);
