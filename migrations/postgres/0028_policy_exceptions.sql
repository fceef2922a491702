-- Break-glass exceptions to a repository's policy (`policy.*`): one version of one name let
-- through before its release age, past a quarantine rule or an enforced advisory, until
-- `expires_at` (ms). Who added it, when and why are kept (and audited).
CREATE TABLE policy_exceptions (
    repository_id BIGINT NOT NULL REFERENCES repositories (id) ON DELETE CASCADE,
    name VARCHAR(400) NOT NULL,
    version VARCHAR(200) NOT NULL,
    expires_at BIGINT NOT NULL,
    reason VARCHAR(1000) NOT NULL,
    created_by VARCHAR(256) NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (repository_id, name, version)
);
