-- Content selectors (#43): named CSEL expressions that a role's privilege may carry to cover
-- only the content they select.
CREATE TABLE content_selectors (
    name TEXT PRIMARY KEY,
    description TEXT NOT NULL,
    expression TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- A webhook subscription narrowed to the component events whose content a selector selects.
ALTER TABLE webhooks ADD COLUMN content_selector TEXT;
