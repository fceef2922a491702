//! Conan 2 over the engine: revisions and their files, and the projections (per reference, and
//! the search index) published as snapshots.

pub mod publish;
pub mod rows;
