//! `packyard-api`: the stateless HTTP replica. Format endpoints (later issues) live under
//! `/repository/<name>/`, the admin API under `/api/v1`; the management listener is shared with
//! the worker (`packyard_worker::management`).

pub mod admin;
pub mod app;
pub mod auth;
pub mod content;
pub mod error;
pub mod export;
pub mod formats;
pub mod frontage;
pub mod hot;
pub mod nexus;
pub mod observe;
pub mod read_only;
pub mod repository;
pub mod route;
pub mod snapshot;
pub mod startup;
pub mod tls;
pub mod ui;
