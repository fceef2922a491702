//! `packyard-formats`: APT, Alpine APK, Go modules and Conan 2, each a slice over the engine of
//! `packyard-core` — its storage, its hosted rules, its index or projection builder, its group
//! merge, its proxy rule. No format uses another's code.

pub mod apk;
pub mod apt;
pub mod conan;
pub mod go;

use packyard_model::repos::{Format, NewRepository};

/// Each format's own checks of a definition the model validated: what needs the format's codec
/// (an upstream key that must parse) or its path rules (APK architectures are path segments).
pub fn check_settings(new: &NewRepository) -> Result<(), String> {
    match new.format {
        Format::Apt => apt::check_settings(new),
        Format::Apk => apk::check_settings(new),
        Format::Go | Format::Conan => Ok(()),
    }
}

/// Adds every format's builders to `builders`.
pub fn builders(
    services: &packyard_core::services::Services,
    builders: packyard_core::publication::Builders,
) -> packyard_core::publication::Builders {
    use std::sync::Arc;
    let keystore = &services.security.keystore;
    let reader = packyard_core::groups::Reader::of(services);
    builders
        .with(
            apt::KIND,
            Arc::new(apt::publish::AptBuilder { page_size: 1_000, keystore: keystore.clone(), reader: reader.clone() }),
        )
        .with(
            apk::KIND,
            Arc::new(apk::publish::ApkBuilder { page_size: 1_000, keystore: keystore.clone(), reader: reader.clone() }),
        )
        .with(go::KIND, Arc::new(go::publish::GoBuilder { page_size: 1_000, reader: reader.clone() }))
        .with(conan::KIND, Arc::new(conan::publish::ConanBuilder { reader: reader.clone() }))
        .with(conan::SEARCH_KIND, Arc::new(conan::publish::ConanSearchBuilder { reader }))
}
