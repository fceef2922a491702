-- Users from a directory (LDAP) or an identity provider (OIDC) have a row like a local user's,
-- so roles, tokens, sessions and the audit log work alike: `source` is `local`, `ldap:<name>` or
-- `oidc`; their password_hash is unusable ("!"). Email and display name come from the source.
ALTER TABLE users ADD COLUMN source TEXT NOT NULL DEFAULT 'local';
ALTER TABLE users ADD COLUMN email TEXT;
ALTER TABLE users ADD COLUMN display_name TEXT;
