-- The instance's read-only mode (Nexus's freeze): one row. While frozen, every write is refused
-- with 503 and reads go on; the reason and who froze it are shown to whoever is refused.
CREATE TABLE read_only (
    id INTEGER PRIMARY KEY,
    frozen INTEGER NOT NULL,
    reason TEXT NOT NULL,
    frozen_by TEXT NOT NULL,
    frozen_at INTEGER NOT NULL
);
INSERT INTO read_only (id, frozen, reason, frozen_by, frozen_at) VALUES (1, 0, '', '', 0);
