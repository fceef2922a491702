-- Incremental APT publication (#22): each change of what a hosted distribution lists — a
-- package or source package joining or leaving it, or deleted — is noted here in the writer's
-- transaction, so that the next build of the distribution re-renders only the chunks of its
-- indexes that hold a noted row, instead of aggregating every row of every index to find them.
-- A build that was published forgets what it consumed (at the next build of the unit).
CREATE TABLE apt_index_changes (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    repository_id BIGINT NOT NULL,
    distribution VARCHAR(64) NOT NULL,
    source BIGINT NOT NULL,
    member_id BIGINT NOT NULL,
    KEY apt_index_changes_unit (repository_id, distribution, id),
    CONSTRAINT apt_index_changes_repository_fk FOREIGN KEY (repository_id) REFERENCES repositories (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
