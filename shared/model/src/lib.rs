//! `packyard-model`: the types and rules every other crate shares — configuration, repositories
//! and their settings, the security model's actions and privileges, network policy, time — with
//! no database, blob store or network I/O (the configuration loader reads its file).

pub mod cleanup;
pub mod config;
pub mod crash;
pub mod directory;
pub mod net;
pub mod repos;
pub mod security;
pub mod time;
