-- Cleanup policies (one format each; criteria and schedule as JSON) and the repositories each
-- cleans.
CREATE TABLE cleanup_policies (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name VARCHAR(64) NOT NULL UNIQUE,
    format VARCHAR(16) NOT NULL,
    description TEXT NOT NULL,
    criteria MEDIUMTEXT NOT NULL,
    schedule TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE repository_cleanup_policies (
    policy_id BIGINT NOT NULL,
    repository_id BIGINT NOT NULL,
    PRIMARY KEY (policy_id, repository_id),
    KEY repository_cleanup_policies_repository (repository_id),
    CONSTRAINT repository_cleanup_policies_policy FOREIGN KEY (policy_id) REFERENCES cleanup_policies (id) ON DELETE CASCADE,
    CONSTRAINT repository_cleanup_policies_repo FOREIGN KEY (repository_id) REFERENCES repositories (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
