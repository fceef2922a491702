-- Failed logins, shared by every replica when no Redis is configured (with Redis they are
-- counted there): more than security.login_max_failures for one user from one address within
-- security.login_window_secs are refused. attempt_key is the SHA-256 (hex) of the user name and
-- the address; window_start (ms) is when the window began.
CREATE TABLE login_failures (
    attempt_key TEXT PRIMARY KEY,
    window_start BIGINT NOT NULL,
    failures BIGINT NOT NULL
);
CREATE INDEX login_failures_window ON login_failures (window_start);
