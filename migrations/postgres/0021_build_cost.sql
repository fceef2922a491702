-- How long a unit's builds take (ms, smoothed over its recent publications): the worker's quiet
-- wait before the next build follows it, and a build this long counts as a heavy one that may not
-- take the last free build slot.
ALTER TABLE publication_units ADD COLUMN build_ms BIGINT;
-- A build of this revision or later is made from nothing (an administrator's rebuild): nothing
-- of the last build is carried over.
ALTER TABLE publication_units ADD COLUMN whole_at_revision BIGINT;
