-- When a repository first saw each version of a unit (a Go module, …) under a policy that ages
-- it: 0 for the versions present when it first saw the unit (their format's own time counts),
-- else the time it saw the version appear (ms). A version is as old as the later of the two,
-- so an upstream cannot make a new version look old by its own time alone.
CREATE TABLE policy_seen (
    repository_id BIGINT NOT NULL,
    unit VARCHAR(400) NOT NULL,
    version VARCHAR(200) NOT NULL,
    first_seen BIGINT NOT NULL,
    PRIMARY KEY (repository_id, unit, version),
    CONSTRAINT policy_seen_repo_fk FOREIGN KEY (repository_id) REFERENCES repositories (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
