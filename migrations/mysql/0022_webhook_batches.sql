-- A subscription may take several pending events of one repository in one request.
ALTER TABLE webhooks ADD COLUMN batch BIGINT NOT NULL DEFAULT 0;
