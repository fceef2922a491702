-- Cleanup policies (one format each; criteria and schedule as JSON) and the repositories each
-- cleans.
CREATE TABLE cleanup_policies (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    format TEXT NOT NULL,
    description TEXT NOT NULL,
    criteria TEXT NOT NULL,
    schedule TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE repository_cleanup_policies (
    policy_id INTEGER NOT NULL REFERENCES cleanup_policies (id) ON DELETE CASCADE,
    repository_id INTEGER NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    PRIMARY KEY (policy_id, repository_id)
);
CREATE INDEX repository_cleanup_policies_repository ON repository_cleanup_policies (repository_id);
