-- Wake-ups relayed from the outbox (#44): a process with RabbitMQ publishes one wake-up for the
-- outbox events it finds neither published nor relayed, and notes each one relayed once the
-- broker has confirmed it. A change whose process could not publish at its commit (the broker
-- away, the process gone) is relayed by the next pass of any process. Events waiting at the
-- upgrade are relayed once more (a spare wake-up).
ALTER TABLE outbox ADD COLUMN relayed_at BIGINT;
CREATE INDEX outbox_relay ON outbox (relayed_at, delivered_at, id);
