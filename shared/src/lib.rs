//! `packyard-shared`: the crates under `shared/`, re-exported by layer — [`model`] (types and
//! rules), [`codecs`] (pure parsers, index writers, signing), [`store`] (database, blobs,
//! metrics), `packyard_core` (services, security, proxy, events, publication, the format engine)
//! and [`formats`] (APT, APK, Go, Conan). Each layer depends only on those before it, so an import
//! cycle between them does not compile.

pub use packyard_codecs as codecs;
pub use packyard_core;
pub use packyard_formats as formats;
pub use packyard_model as model;
pub use packyard_store as store;
