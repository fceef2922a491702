//! `packyard-formats`: APT, Alpine APK, Go modules and Conan 2, each a slice over the engine of
//! `packyard-core` — its storage, its hosted rules, its index or projection builder, its group
//! merge, its proxy rule. No format uses another's code.

pub mod apk;
pub mod apt;
pub mod conan;
pub mod go;

use packyard_core::catalogue::Catalogue;
use packyard_core::hosted::{self, Actor, UploadError};
use packyard_core::services::Services;
use packyard_model::repos::{Format, NewRepository, Repository};

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
            Arc::new(apt::publish::AptBuilder {
                page_size: 1_000,
                keystore: keystore.clone(),
                reader: reader.clone(),
                memory: Default::default(),
            }),
        )
        .with(
            apk::KIND,
            Arc::new(apk::publish::ApkBuilder {
                keystore: keystore.clone(),
                reader: reader.clone(),
                memory: Default::default(),
            }),
        )
        .with(go::KIND, Arc::new(go::publish::GoBuilder { page_size: 1_000, reader: reader.clone() }))
        .with(conan::KIND, Arc::new(conan::publish::ConanBuilder { reader: reader.clone() }))
        .with(conan::SEARCH_KIND, Arc::new(conan::publish::ConanSearchBuilder { reader }))
}

/// What each format tells the catalogue.
pub fn catalogue(format: Format) -> &'static dyn Catalogue {
    match format {
        Format::Apt => &apt::catalogue::AptCatalogue,
        Format::Apk => &apk::catalogue::ApkCatalogue,
        Format::Go => &go::catalogue::GoCatalogue,
        Format::Conan => &conan::catalogue::ConanCatalogue,
    }
}

/// Deletes a hosted repository's catalogued component `key` as the format's own delete does
/// (rows, republication, audit entry); `asset` narrows it where a format's component has parts
/// of its own (a Conan package revision's file deletes that package revision). The changes to
/// wait for, or `None` when it is gone already.
pub async fn delete_catalogued(
    services: &Services,
    repo: &Repository,
    key: &str,
    asset: Option<&str>,
    actor: Actor<'_>,
) -> Result<Option<Vec<(i64, i64)>>, UploadError> {
    // `v2/conans/<n>/<v>/<u>/<c>/revisions/<rrev>/packages/<pkgid>/revisions/<prev>/files/…`
    let package = asset.filter(|_| repo.format == Format::Conan).and_then(|path| {
        let s: Vec<&str> = path.split('/').collect();
        match s.get(8..12) {
            Some(["packages", pkgid, "revisions", prev]) => Some((pkgid.to_string(), prev.to_string())),
            _ => None,
        }
    });
    if let (Some(package), Some((reference, rrev))) = (package, key.rsplit_once('#')) {
        let revision =
            conan::hosted::Revision { reference: reference.into(), rrev: rrev.into(), package: Some(package) };
        let removal = conan::hosted::Removal { revision, packages_only: false };
        let deleted = hosted::delete(&conan::hosted::ConanHosted, services, repo, &removal, actor).await?;
        return Ok(deleted.map(|d| d.changes));
    }
    let (n, changes) = catalogue(repo.format).delete_batch(services, repo, &[key.to_string()], actor).await?;
    Ok((n > 0).then_some(changes))
}
