-- A subscription may take several pending events of one repository in one request.
ALTER TABLE webhooks ADD COLUMN batch INTEGER NOT NULL DEFAULT 0;
