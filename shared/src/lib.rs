//! `packyard-shared`: the domain model, configuration, storage (database and blobs), and the
//! services both binaries use. Nothing here knows about HTTP.

pub mod auth;
pub mod blobs;
pub mod config;
pub mod crash;
pub mod db;
pub mod events;
pub mod formats;
#[cfg(feature = "testing")]
pub mod fuzzing;
pub mod metrics;
pub mod proxy;
pub mod publication;
pub mod repos;
pub mod security;
pub mod services;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
pub mod time;
