//! `packyard-model`: the types and rules every other crate shares — configuration, repositories
//! and their settings, the security model's actions and privileges, network policy, time — with
//! no database, blob store or network I/O (the configuration loader reads its file).

pub mod cleanup;
pub mod config;
pub mod crash;
pub mod directory;
pub mod net;
pub mod osv;
pub mod policy;
pub mod quota;
pub mod repos;
pub mod security;
pub mod selector;
pub mod time;

/// Whether `name` is a name an administrator gives (a policy, a role, a webhook, a user): 1 to
/// 64 bytes of ASCII letters and digits and the punctuation in `also` (each caller's message
/// says which).
pub fn is_plain_name(name: &str, also: &[u8]) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || also.contains(&b))
}
