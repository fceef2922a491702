-- Users from a directory (LDAP) or an identity provider (OIDC) have a row like a local user's,
-- so roles, tokens, sessions and the audit log work alike: `source` is `local`, `ldap:<name>` or
-- `oidc`; their password_hash is unusable ("!"). Email and display name come from the source.
ALTER TABLE users ADD COLUMN source TEXT NOT NULL DEFAULT 'local';
ALTER TABLE users ADD COLUMN email TEXT;
ALTER TABLE users ADD COLUMN display_name TEXT;
-- Who the source says the user is, beyond the name: an LDAP entry's DN, an OIDC `iss` + `sub`.
-- A sign-in that names the same user but another account is refused (a reused name).
ALTER TABLE users ADD COLUMN external_id TEXT;
