//! `packyard-formats`: APT, Alpine APK, Go modules and Conan 2, each a slice over the engine of
//! `packyard-core` — its storage, its hosted rules, its index or projection builder, its group
//! merge, its proxy rule. No format uses another's code.

pub mod apk;
pub mod apt;
pub mod conan;
pub mod go;

use std::sync::LazyLock;

use packyard_core::catalogue::Catalogue;
use packyard_core::formats::Registry;
use packyard_model::repos::Format;

/// Every format, registered once: the one list of formats.
pub fn registry() -> &'static Registry {
    static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
        Registry::new(vec![&apt::spec::AptSpec, &apk::spec::ApkSpec, &go::spec::GoSpec, &conan::spec::ConanSpec])
    });
    &REGISTRY
}

/// What `format` tells the catalogue (the registry's).
pub fn catalogue(format: Format) -> &'static dyn Catalogue {
    registry().get(format).catalogue()
}
