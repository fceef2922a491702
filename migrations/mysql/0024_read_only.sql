-- The instance's read-only mode (Nexus's freeze): one row. While frozen, every write is refused
-- with 503 and reads go on; the reason and who froze it are shown to whoever is refused.
CREATE TABLE read_only (
    id BIGINT PRIMARY KEY,
    frozen BIGINT NOT NULL,
    reason VARCHAR(2000) NOT NULL,
    frozen_by VARCHAR(2000) NOT NULL,
    frozen_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO read_only (id, frozen, reason, frozen_by, frozen_at) VALUES (1, 0, '', '', 0);
