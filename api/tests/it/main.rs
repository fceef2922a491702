//! The API's integration tests, one module per area, in one test crate: one link instead of one
//! per file. Run one area with `cargo nextest run -p packyard-api --test it -E 'test(/^apt::/)'`.

#[macro_use]
mod common;

mod admin_api;
mod apk;
mod apt;
mod backup;
mod binary;
mod bundles;
mod cleanup;
mod cluster;
mod conan;
mod deploy;
mod engine;
mod faults;
mod go;
mod hostile;
mod import;
mod ldap;
mod loadtest;
mod local_cluster;
mod loose_ends;
mod nexus;
mod nexus_write;
mod oidc;
mod peers_apt;
mod peers_conan;
mod peers_go;
mod poisoning;
mod policy;
mod policy_indexes;
mod quotas;
mod reclaim;
mod rotation;
mod sample;
mod security;
mod selectors;
mod snapshots;
mod tls;
mod ui;
mod upstreams;
mod vulnerabilities;
mod webhooks;
