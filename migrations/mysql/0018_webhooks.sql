-- Webhooks: subscriptions (global or per repository) to events; the events themselves, written
-- in the transaction of the change they describe (the outbox); and one delivery per event and
-- matching subscription, delivered by the workers in order per subscription and repository,
-- retried with backoff, its attempts kept as the subscription's delivery log.
CREATE TABLE webhooks (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name VARCHAR(64) NOT NULL UNIQUE,
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    repository VARCHAR(200),
    secret_nonce VARCHAR(64) NOT NULL,
    secret_sealed TEXT NOT NULL,
    enabled BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE webhook_events (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    event VARCHAR(64) NOT NULL,
    repository_key VARCHAR(200) NOT NULL,
    payload MEDIUMTEXT NOT NULL,
    created_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE webhook_deliveries (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    webhook_id BIGINT NOT NULL,
    event_id BIGINT NOT NULL,
    repository_key VARCHAR(200) NOT NULL,
    state VARCHAR(16) NOT NULL,
    attempts BIGINT NOT NULL,
    next_attempt_at BIGINT NOT NULL,
    leased_until BIGINT NOT NULL,
    last_status BIGINT,
    last_error TEXT,
    created_at BIGINT NOT NULL,
    delivered_at BIGINT,
    CONSTRAINT webhook_deliveries_hook_fk FOREIGN KEY (webhook_id) REFERENCES webhooks (id) ON DELETE CASCADE,
    CONSTRAINT webhook_deliveries_event_fk FOREIGN KEY (event_id) REFERENCES webhook_events (id) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (state, webhook_id, repository_key, id);
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (webhook_id, id);
