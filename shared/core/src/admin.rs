//! Typed administration services — users, roles, tokens — with their rules, their changes, their audit
//! entries and the events that tell other replicas: what the admin API answers as JSON and the
//! web UI renders as pages, each calling them directly (the UI never goes through the API's
//! JSON). Who may call them is decided by the caller's edge (the API's `Admin` extractor, the
//! UI's viewer), before.

pub mod roles;
pub mod tokens;
pub mod users;

use packyard_store::db::DbError;

use crate::auth::AuthError;
use crate::security::service::PasswordChangeError;

/// Why an administration request was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The request cannot be done as sent (400).
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
    /// The state forbids it (409).
    #[error("{0}")]
    Conflict(String),
    /// The caller may not do this (403).
    #[error("{0}")]
    Forbidden(String),
    #[error(transparent)]
    Password(#[from] PasswordChangeError),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error(transparent)]
    Db(#[from] DbError),
}

pub type AdminResult<T> = Result<T, AdminError>;
