//! `packyard-api import apt`: any published APT repository — a directory or a URL, as aptly,
//! reprepro, Nexus or a Debian mirror publish it — into a hosted APT repository. For each
//! distribution: its `InRelease` (verified against `--key` when given; without a key its
//! `Release`), then each component's `Packages` of each architecture (and `Sources`), each
//! checked against the `SHA256` the `Release` lists, then every `.deb` (and source package) they
//! name, each checked against its index's `SHA256` as it is copied. The repository must publish
//! what is imported: a distribution, component or architecture it lacks is named, with the
//! change to make, before anything is copied.

use std::collections::{BTreeSet, HashSet};
use std::io::{BufReader, Read};

use async_trait::async_trait;
use packyard_codecs::apt::fields;
use packyard_codecs::apt::signing::{parse_public_keys, verify_clearsigned};
use packyard_core::hosted::{self, UploadError};
use packyard_core::import::{discard_all, Fetcher, ImportError, Importer, Item, Location, StoreCx, Stored};
use packyard_model::repos::{FormatSettings, Repository};
use packyard_store::blobs::StoredBlob;

use super::group::{sha256_section, stanzas, StanzaReader, FORMS};
use super::hosted::{AptHosted, AptTarget};
use super::settings::AptSettings;

/// What to import, as the command line says it.
pub struct AptImport {
    pub from: Location,
    /// The armored key (or keyring) `InRelease` must be signed by (`--key`); `None`: not
    /// verified.
    pub key: Option<String>,
    /// Chosen distributions (empty: every one the directory has under `dists/`, or, from a URL,
    /// the target repository's).
    pub distributions: Vec<String>,
    /// Chosen components and architectures (empty: every one the `Release` lists).
    pub components: Vec<String>,
    pub architectures: Vec<String>,
    /// Source packages too (`Sources`).
    pub sources: bool,
}

impl AptImport {
    /// From the command line: `--key` (an armored public key or keyring) and `--only`
    /// `distribution=`, `component=`, `architecture=` (each may repeat), `sources=no`.
    pub fn from_args(args: packyard_core::import::ImportArgs) -> Result<Self, String> {
        if let Some(text) = &args.key {
            parse_public_keys(text).map_err(|e| format!("--key: {e}"))?;
        }
        let mut out = Self {
            from: args.from,
            key: args.key,
            distributions: Vec::new(),
            components: Vec::new(),
            architectures: Vec::new(),
            sources: true,
        };
        for (name, value) in args.only {
            match name.as_str() {
                "distribution" => out.distributions.push(value),
                "component" => out.components.push(value),
                "architecture" => out.architectures.push(value),
                "sources" if value == "no" => out.sources = false,
                "sources" if value == "yes" => out.sources = true,
                _ => {
                    return Err(format!(
                        "--only {name}={value}: an APT import chooses distribution=, component=, architecture= (each may repeat) or sources=no"
                    ))
                }
            }
        }
        Ok(out)
    }
}

/// Where an item goes, and (a source package's `.dsc`) the files that go with it.
#[derive(Debug, Clone)]
pub struct AptItem {
    pub distribution: String,
    pub component: String,
    /// A source package's other files: name, location, SHA-256, size.
    pub files: Vec<(String, Location, String, u64)>,
}

/// A `Release`'s fields of one line (`Components`, `Architectures`) as words.
fn words(release: &str, name: &str) -> Vec<String> {
    release
        .lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':')))
        .map(|v| v.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

impl AptImport {
    /// The distributions to import.
    async fn distributions(&self, repo: &Repository) -> Result<Vec<String>, ImportError> {
        if !self.distributions.is_empty() {
            return Ok(self.distributions.clone());
        }
        match &self.from {
            Location::Dir(d) => {
                let dists = d.join("dists");
                let mut out: Vec<String> = std::fs::read_dir(&dists)
                    .map_err(|e| {
                        ImportError::source(format!(
                            "{}: {e} (an APT repository has dists/<distribution>/)",
                            dists.display()
                        ))
                    })?
                    .filter_map(Result::ok)
                    .filter(|e| e.path().join("Release").is_file() || e.path().join("InRelease").is_file())
                    .filter_map(|e| e.file_name().to_str().map(str::to_string))
                    .collect();
                out.sort();
                if out.is_empty() {
                    return Err(ImportError::source(format!(
                        "{}: no distribution with a Release file",
                        dists.display()
                    )));
                }
                Ok(out)
            }
            Location::Url(_) => Ok(AptSettings::of(repo).suites().iter().map(|s| s.to_string()).collect()),
        }
    }

    /// A distribution's `Release` text: the verified `InRelease`, or without a key the
    /// `Release`.
    async fn release(&self, fetcher: &Fetcher, dist: &str) -> Result<String, ImportError> {
        let dir = self.from.join(&format!("dists/{dist}/InRelease"))?;
        let inrelease = fetcher.read(&dir).await?;
        match (&self.key, inrelease) {
            (Some(key), Some(bytes)) => {
                let text = String::from_utf8(bytes.to_vec()).map_err(|_| ImportError::source(format!("{dir}: not text")))?;
                let keys = parse_public_keys(key).map_err(|e| ImportError::source(format!("--key: {e}")))?;
                verify_clearsigned(&text, &keys).map_err(|e| {
                    ImportError::source(format!("{dir} is not signed by the key given with --key: {e}; nothing was copied"))
                })
            }
            (Some(_), None) => Err(ImportError::source(format!(
                "{dir} is missing: with --key Packyard verifies the clear-signed InRelease, which this source does not publish"
            ))),
            (None, _) => {
                let release = self.from.join(&format!("dists/{dist}/Release"))?;
                let bytes = fetcher
                    .read(&release)
                    .await?
                    .ok_or_else(|| ImportError::source(format!("{release} is missing: is {dist} a distribution of {}?", self.from)))?;
                String::from_utf8(bytes.to_vec()).map_err(|_| ImportError::source(format!("{release}: not text")))
            }
        }
    }

    /// An index of `dist` (`main/binary-amd64/Packages`) as stanzas, in its first form the
    /// `Release` lists, checked against the `Release`; `None` when it lists none.
    async fn index(
        &self,
        fetcher: &Fetcher,
        dist: &str,
        release: &str,
        base: &str,
    ) -> Result<Option<Stanzas>, ImportError> {
        for (suffix, compression) in FORMS {
            let name = format!("{base}{suffix}");
            let Some((sha, _)) = sha256_section(release).into_iter().find(|(_, p)| *p == name) else { continue };
            let at = self.from.join(&format!("dists/{dist}/{name}"))?;
            let Some(bytes) = fetcher.read(&at).await? else { continue };
            let got = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
            if !got.eq_ignore_ascii_case(sha) {
                return Err(ImportError::source(format!(
                    "{at}: its SHA-256 is {got}, the Release lists {sha}: nothing was copied"
                )));
            }
            return Ok(Some(stanzas(bytes, compression)));
        }
        Ok(None)
    }
}

/// An index's stanzas as they are decompressed.
type Stanzas = StanzaReader<BufReader<Box<dyn Read + Send>>>;

/// A stanza's fields, or why it cannot be read.
fn stanza_fields(text: &str) -> Result<Vec<fields::Field<'_>>, String> {
    fields::paragraph(text).map_err(|e| e.to_string())
}

fn field(f: &[fields::Field<'_>], name: &str) -> Option<String> {
    fields::get(f, name).map(|f| f.value.trim().to_string())
}

#[async_trait]
impl Importer for AptImport {
    type Target = AptItem;

    async fn plan(&self, fetcher: &Fetcher, repo: &Repository) -> Result<Vec<Item<AptItem>>, ImportError> {
        let settings = AptSettings::of(repo);
        let suites: Vec<String> = settings.suites().iter().map(|s| s.to_string()).collect();
        let mut missing: BTreeSet<String> = BTreeSet::new();
        let mut items = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        for dist in self.distributions(repo).await? {
            if !suites.contains(&dist) {
                missing.insert(format!("distribution {dist} (apt.distributions)"));
            }
            let release = self.release(fetcher, &dist).await?;
            let listed = |what: &str, chosen: &[String]| -> Result<Vec<String>, ImportError> {
                let all = words(&release, what);
                if chosen.is_empty() {
                    return Ok(all);
                }
                match chosen.iter().find(|c| !all.contains(c)) {
                    Some(c) => Err(ImportError::source(format!(
                        "{dist} has no {} {c} (it has: {})",
                        what.to_lowercase(),
                        all.join(", ")
                    ))),
                    None => Ok(chosen.to_vec()),
                }
            };
            let components = listed("Components", &self.components)?;
            let mut architectures = listed("Architectures", &self.architectures)?;
            if !architectures.iter().any(|a| a == "all") {
                architectures.push("all".into());
            }
            for component in &components {
                // reprepro's and Debian's `Release` may name components as `updates/main`.
                if !settings.components.contains(component) {
                    missing.insert(format!("component {component} (apt.components)"));
                }
                for arch in &architectures {
                    let base = format!("{component}/binary-{arch}/Packages");
                    let Some(mut reader) = self.index(fetcher, &dist, &release, &base).await? else { continue };
                    if arch != "all" && !settings.architectures.contains(arch) {
                        missing.insert(format!("architecture {arch} (apt.architectures)"));
                    }
                    let mut stanza = String::new();
                    while reader.next_stanza(&mut stanza).map_err(|e| ImportError::source(format!("{base}: {e}")))? {
                        let f = stanza_fields(&stanza)
                            .map_err(|e| ImportError::source(format!("dists/{dist}/{base}: {e}")))?;
                        let (Some(file), Some(sha256)) = (field(&f, "Filename"), field(&f, "SHA256")) else {
                            return Err(ImportError::source(format!(
                                "dists/{dist}/{base}: a package without Filename or SHA256"
                            )));
                        };
                        let key = format!("{dist}/{component}/{file}");
                        if !seen.insert(key.clone()) {
                            continue;
                        }
                        items.push(Item {
                            key,
                            location: self.from.join(&file)?,
                            sha256: Some(sha256.to_ascii_lowercase()),
                            size: field(&f, "Size").and_then(|s| s.parse().ok()),
                            target: AptItem {
                                distribution: dist.clone(),
                                component: component.clone(),
                                files: Vec::new(),
                            },
                        });
                    }
                }
                if self.sources {
                    let base = format!("{component}/source/Sources");
                    if let Some(reader) = self.index(fetcher, &dist, &release, &base).await? {
                        self.plan_sources(reader, (&dist, component), &mut items, &mut seen)?;
                    }
                }
            }
        }
        if !missing.is_empty() {
            return Err(ImportError::source(format!(
                "repository {} does not publish what the source has: {}; add them to its settings (PATCH /api/v1/repositories/{}) and import again — nothing was copied",
                repo.name,
                missing.into_iter().collect::<Vec<_>>().join(", "),
                repo.name
            )));
        }
        Ok(items)
    }

    async fn store(&self, cx: &StoreCx<'_>, item: &Item<AptItem>, stored: StoredBlob) -> Result<Stored, UploadError> {
        let (services, t) = (cx.services, &item.target);
        let mut files: Vec<(String, StoredBlob)> = Vec::new();
        let fetched = async {
            for (name, at, sha256, size) in &t.files {
                let f = cx.fetch(at, "Sources").await?;
                let ok = f.sha256.as_str().eq_ignore_ascii_case(sha256) && f.size == *size;
                files.push((name.clone(), f.clone()));
                if !ok {
                    return Err(UploadError::Invalid(format!(
                        "{at}: the bytes fetched (sha256 {}) are not those Sources lists ({sha256})",
                        f.sha256
                    )));
                }
            }
            Ok(())
        }
        .await;
        if let Err(e) = fetched {
            let received: Vec<StoredBlob> = files.into_iter().map(|(_, f)| f).chain([stored]).collect();
            discard_all(services, &received).await;
            return Err(e);
        }
        let received: Vec<StoredBlob> = files.iter().map(|(_, f)| f.clone()).collect();
        let with = received.iter().map(|f| f.size).sum();
        let target = AptTarget {
            distribution: Some(t.distribution.clone()),
            component: Some(t.component.clone()),
            architecture: None,
            files,
        };
        match hosted::upload_stored(&AptHosted, services, cx.repo, target, stored, cx.actor).await {
            Ok(up) => Ok(Stored { created: up.created, with }),
            Err(e) => {
                // A refused source package leaves none of its files (the engine removed the
                // `.dsc` and those it knew of).
                discard_all(services, &received).await;
                Err(e)
            }
        }
    }
}

impl AptImport {
    /// Each source package of a `Sources` index: its `.dsc` is the item, its other files go
    /// with it.
    fn plan_sources(
        &self,
        mut reader: Stanzas,
        (dist, component): (&str, &str),
        items: &mut Vec<Item<AptItem>>,
        seen: &mut HashSet<String>,
    ) -> Result<(), ImportError> {
        let mut stanza = String::new();
        let at = format!("dists/{dist}/{component}/source/Sources");
        while reader.next_stanza(&mut stanza).map_err(|e| ImportError::source(format!("{at}: {e}")))? {
            let f = stanza_fields(&stanza).map_err(|e| ImportError::source(format!("{at}: {e}")))?;
            let dir = field(&f, "Directory")
                .ok_or_else(|| ImportError::source(format!("{at}: a source without Directory")))?;
            let sums = field(&f, "Checksums-Sha256")
                .ok_or_else(|| ImportError::source(format!("{at}: a source without Checksums-Sha256")))?;
            let mut dsc = None;
            let mut files = Vec::new();
            for line in sums.lines().map(str::trim).filter(|l| !l.is_empty()) {
                let parts: Vec<&str> = line.split_whitespace().collect();
                let [sha, size, name] = parts.as_slice() else {
                    return Err(ImportError::source(format!("{at}: a Checksums-Sha256 line {line:?}")));
                };
                let location = self.from.join(&format!("{dir}/{name}"))?;
                let size: u64 = size.parse().map_err(|_| ImportError::source(format!("{at}: a size {size:?}")))?;
                if name.ends_with(".dsc") {
                    dsc = Some((format!("{dir}/{name}"), location, sha.to_ascii_lowercase(), size));
                } else {
                    files.push((name.to_string(), location, sha.to_ascii_lowercase(), size));
                }
            }
            let Some((path, location, sha256, size)) = dsc else {
                return Err(ImportError::source(format!("{at}: a source package without a .dsc")));
            };
            let key = format!("{dist}/{component}/{path}");
            if seen.insert(key.clone()) {
                let target = AptItem { distribution: dist.to_string(), component: component.to_string(), files };
                items.push(Item { key, location, sha256: Some(sha256), size: Some(size), target });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_release_is_read() {
        let r = "Origin: x\nComponents: main contrib\nArchitectures: amd64 arm64\nMD5Sum:\n aa 1 main/binary-amd64/Packages\nSHA256:\n BB 12 main/binary-amd64/Packages\n cc 2 main/binary-amd64/Packages.xz\n";
        assert_eq!(super::words(r, "Components"), ["main", "contrib"]);
        assert_eq!(super::words(r, "Architectures"), ["amd64", "arm64"]);
        // The SHA256 section as the importer reads it (group.rs's reader, shared).
        let sums = super::sha256_section(r);
        assert_eq!(sums, [("BB", "main/binary-amd64/Packages"), ("cc", "main/binary-amd64/Packages.xz")]);
    }
}
