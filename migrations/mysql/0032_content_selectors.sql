-- Content selectors (#43): named CSEL expressions that a role's privilege may carry to cover
-- only the content they select.
CREATE TABLE content_selectors (
    name VARCHAR(64) NOT NULL PRIMARY KEY,
    description VARCHAR(1000) NOT NULL,
    expression TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- A webhook subscription narrowed to the component events whose content a selector selects.
ALTER TABLE webhooks ADD COLUMN content_selector VARCHAR(64);
