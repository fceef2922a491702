//! API tokens: `pky_<id>_<secret>`. The id (12 hex) finds the row; only SHA-256 of the secret
//! is stored, compared in constant time. Tokens are long random strings, so a fast hash is the
//! right one (unlike passwords).

use sha2::{Digest, Sha256};

pub const PREFIX: &str = "pky_";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewToken {
    pub id: String,
    /// The whole token, shown to the user once.
    pub token: String,
    pub secret_hash: String,
}

pub fn generate() -> NewToken {
    let id = hex::encode(rand::random::<[u8; 6]>());
    let secret = hex::encode(rand::random::<[u8; 24]>());
    NewToken { token: format!("{PREFIX}{id}_{secret}"), secret_hash: hash_secret(&secret), id }
}

pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Splits a presented token into (id, secret); `None` if it is not shaped like one.
pub fn parse(token: &str) -> Option<(&str, &str)> {
    let rest = token.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let hexish = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hexish(id, 12) && hexish(secret, 48)).then_some((id, secret))
}

/// Constant-time equality of two hex digests.
pub fn digest_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let t = generate();
        let (id, secret) = parse(&t.token).unwrap_or_default();
        assert_eq!(id, t.id);
        assert!(digest_eq(&hash_secret(secret), &t.secret_hash));
        assert!(!digest_eq(&hash_secret("other"), &t.secret_hash));
        assert_eq!(parse("pky_short_x"), None);
        assert_eq!(parse("password"), None);
        assert_ne!(generate().token, t.token);
    }
}
