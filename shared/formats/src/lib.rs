//! `packyard-formats`: APT, Alpine APK, Go modules and Conan 2 — and the test-only sample
//! format — each a slice over the engine of `packyard-core`: its storage, its hosted rules, its
//! index or projection builder, its group merge, its proxy rule. No format uses another's code.

pub mod apk;
pub mod apt;
pub mod conan;
pub mod go;
pub mod sample;

use std::sync::LazyLock;

use packyard_core::catalogue::Catalogue;
use packyard_core::formats::Registry;
use packyard_model::repos::Format;

/// Every format, registered once: the one list of formats.
pub fn registry() -> &'static Registry {
    static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
        Registry::new(vec![
            &apt::spec::AptSpec,
            &apk::spec::ApkSpec,
            &go::spec::GoSpec,
            &conan::spec::ConanSpec,
            &sample::spec::SampleSpec,
        ])
    });
    &REGISTRY
}

/// What `format` tells the catalogue (the registry's).
pub fn catalogue(format: Format) -> &'static dyn Catalogue {
    registry().get(format).catalogue()
}

#[cfg(test)]
mod tests {
    use packyard_model::cleanup::{Criteria, PolicySpec, Schedule, Selectable};
    use packyard_model::repos::{Format, NewRepository, RepositorySpec};

    /// A repository definition as the admin API checks it: the model's rules, then its format's.
    pub(crate) fn validated(json: serde_json::Value) -> Result<NewRepository, String> {
        let spec: RepositorySpec = serde_json::from_value(json).map_err(|e| format!("json: {e}"))?;
        super::registry().validate(spec, None).map_err(|e| e.into_invalid(None).0)
    }

    /// The settings of type `T` a definition stores, as the admin API checks it.
    pub(crate) fn settings<T: packyard_model::repos::FormatSettings>(json: serde_json::Value) -> Result<T, String> {
        validated(json)?.settings.format::<T>().ok_or_else(|| format!("no {} settings stored", T::FORMAT))
    }

    /// Why a definition is refused (or what was made of one that should have been).
    pub(crate) fn invalid(json: serde_json::Value) -> String {
        match validated(json) {
            Err(m) => m,
            Ok(new) => format!("unexpected: {new:?}"),
        }
    }

    fn selectable(format: Format) -> Selectable {
        super::catalogue(format).selectable()
    }

    fn spec(format: Format, criteria: Criteria) -> PolicySpec {
        PolicySpec {
            name: None,
            format,
            description: String::new(),
            criteria,
            schedule: None,
            repositories: Vec::new(),
        }
    }

    #[test]
    fn policies_are_checked() {
        let keep = Criteria { keep_latest: Some(3), ..Criteria::default() };
        assert_eq!(spec(Format::Apt, keep.clone()).validate("apt-keep-3", &selectable), Ok(()));
        let cases = [
            (spec(Format::Apt, Criteria::default()), "give at least one"),
            (spec(Format::Apt, Criteria { prereleases_only: true, ..Criteria::default() }), "applies to go"),
            (spec(Format::Go, Criteria { keep_latest_revisions: Some(2), ..Criteria::default() }), "applies to conan"),
            (spec(Format::Go, Criteria { keep_latest: Some(0), ..Criteria::default() }), "keep at least 1"),
            (
                spec(Format::Go, Criteria { name_regex: Some("(".into()), ..Criteria::default() }),
                "criteria.name_regex is not a regular expression",
            ),
            (
                PolicySpec {
                    schedule: Some(Schedule { every_secs: Some(5), cron: None }),
                    ..spec(Format::Go, keep.clone())
                },
                "at least 60",
            ),
            (
                PolicySpec {
                    schedule: Some(Schedule { every_secs: Some(3600), cron: Some("0 3 * * *".into()) }),
                    ..spec(Format::Go, keep.clone())
                },
                "not both",
            ),
            (
                PolicySpec {
                    schedule: Some(Schedule { every_secs: None, cron: Some("0 25 * * *".into()) }),
                    ..spec(Format::Go, keep.clone())
                },
                "schedule.cron: hour: 25",
            ),
        ];
        for (s, says) in cases {
            let e = s.validate("p", &selectable).err().unwrap_or_default();
            assert!(e.contains(says), "{s:?}: {e}");
        }
        assert!(spec(Format::Apt, keep).validate("bad name", &selectable).is_err());
    }
}
