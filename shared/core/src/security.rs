//! The security model: privileges scoped by repository-name globs, principals, API tokens, the
//! node-local decision cache with its watermark, login throttling, the audit log and the key
//! store for secrets at rest.
//!
//! One decision function, [`Principal::allows`], answers every "may this caller do that to this
//! repository"; HTTP routes only declare which [`Action`] they need.

pub mod cache;
pub mod external;
pub mod keystore;
pub mod ldap;
pub mod oidc;
pub use packyard_model::security as model;
pub mod service;
pub mod throttle;
pub mod tokens;

pub use model::{Action, Principal, Privilege};
