-- Web UI sessions are tokens of their own kind: a session cookie is accepted by the UI only,
-- never as an API token, and is listed apart from a user's API tokens.
ALTER TABLE api_tokens ADD COLUMN session INTEGER NOT NULL DEFAULT 0;
