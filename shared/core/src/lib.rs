//! `packyard-core`: the engine both binaries run — services and readiness, the security service
//! (credentials, decisions, caches, throttling, the key store), the proxy fetcher every format's
//! proxy uses, Redis and RabbitMQ events, the publication pipeline (builders, snapshots, the
//! replicas' published cache) and what every hosted upload shares.

pub mod admin;
pub mod auth;
pub mod backup;
pub mod bundle;
pub mod catalogue;
pub mod certs;
pub mod cleanup;
pub mod digests;
pub mod downloads;
pub mod events;
pub mod formats;
pub mod groups;
pub mod hosted;
pub mod import;
pub mod outbound;
pub mod policy;
pub mod proxy;
pub mod publication;
pub mod quota;
pub mod read_only;
pub mod reclaim;
pub mod replication;
pub mod repositories;
pub mod security;
pub mod services;
pub mod telemetry;
pub mod vulnerabilities;
pub mod webhooks;
