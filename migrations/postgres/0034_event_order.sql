-- Event order (#44): webhook events are numbered in the order they committed, not the order
-- their rows were inserted (two writers may commit out of order). A worker numbers the committed
-- events that have no number yet, one numbering at a time (it locks the `sequences` row), so a
-- number once seen is never followed by a smaller one. Deliveries go out in their events' order
-- (joined: numbering touches the events' rows alone). Events from before this migration keep
-- their ids as their numbers.
CREATE TABLE sequences (
    name TEXT NOT NULL PRIMARY KEY,
    value BIGINT NOT NULL
);
ALTER TABLE webhook_events ADD COLUMN seq BIGINT;
UPDATE webhook_events SET seq = id;
INSERT INTO sequences (name, value) SELECT 'webhook_events', COALESCE(MAX(id), 0) FROM webhook_events;
CREATE UNIQUE INDEX webhook_events_seq ON webhook_events (seq);
