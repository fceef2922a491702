-- Storage quotas (#43): one row per repository with a quota, locked by the writes that check it
-- (so that they count one after another) — a table no other row refers to, so that locking it
-- waits for no insert elsewhere.
CREATE TABLE quota_locks (
    repository_id BIGINT NOT NULL PRIMARY KEY
) ENGINE=InnoDB;
