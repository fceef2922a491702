//! `packyard-store`: where state lives — the database (one storage API and one SQL dialect layer
//! over SQLite, PostgreSQL and MySQL/MariaDB, with the embedded migrations), the content-addressed
//! blob stores (files, S3, each replica's hot cache) and the metrics registry every storage call
//! counts itself in.

pub mod blobs;
pub mod db;
pub mod metrics;
pub mod pause;
pub mod sql;
#[cfg(feature = "testing")]
pub mod testing;
