-- Incremental APT publication (#22): each change of what a hosted distribution lists — a
-- package or source package joining or leaving it, or deleted — is noted here in the writer's
-- transaction, so that the next build of the distribution re-renders only the chunks of its
-- indexes that hold a noted row, instead of aggregating every row of every index to find them.
-- A build that was published forgets what it consumed (at the next build of the unit).
CREATE TABLE apt_index_changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    repository_id INTEGER NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    distribution TEXT NOT NULL,
    source INTEGER NOT NULL,
    member_id INTEGER NOT NULL
);
CREATE INDEX apt_index_changes_unit ON apt_index_changes (repository_id, distribution, id);
