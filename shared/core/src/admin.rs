//! Typed administration services — users, roles, tokens, repositories, cleanup policies, webhooks —
//! with their rules, their changes, their audit entries and the events that tell other replicas:
//! what the admin API answers as JSON and the web UI renders as pages, each calling them directly
//! (the UI never goes through the API's JSON). The edge decides who is asking (the API's `Admin`
//! and `Authenticated` extractors, the UI's viewer); a service decides what that caller may do
//! where the rule is about the caller (one's own password or tokens, a token making tokens), from
//! what the edge says of it (`users::PasswordCaller`, `tokens::Owner`).

pub mod cleanup;
pub mod policy;
pub mod promotion;
pub mod repositories;
pub mod roles;
pub mod rollback;
pub mod selectors;
pub mod snapshots;
pub mod tokens;
pub mod users;
pub mod webhooks;

use packyard_store::db::DbError;

use crate::auth::AuthError;
use crate::formats::KeyError;
use crate::repositories::RepoError;
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
    /// A repository's definition refused, or the repository missing.
    #[error(transparent)]
    Repository(#[from] RepoError),
    /// A signing-key request refused.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// What cannot happen did (500).
    #[error("{0}")]
    Internal(String),
}

pub type AdminResult<T> = Result<T, AdminError>;
