//! Go modules over the engine: hosted uploads and deletes, and the per-module projection
//! (`@v/list`, `@latest`, `@v/<version>.info`) published as a snapshot.

pub mod hosted;
pub mod publish;
pub mod rows;

/// The unit kind of Go projections (one unit per module of a repository).
pub const KIND: &str = "go";
