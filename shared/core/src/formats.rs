//! The format registry: what a format supplies to the engine, asked for by the generic code,
//! which never matches on a format. Each format implements [`FormatSpec`] in its own folder of
//! `packyard-formats`, whose `registry()` is the one list; core's code that needs it takes it as
//! an argument (cleanup, reclamation, `RepositoryService`), the binaries and the API name it.
//!
//! Architecture invariant: core names no format. What differs between formats is a method here.
//! `Services` (the infrastructure) knows no registry: a spec's methods take `&Services`, so the
//! registry stands above it, and core's files import each other in one direction (no circle).

use async_trait::async_trait;
use serde::Deserialize;

use packyard_model::repos::{
    Format, FormatSettings, InvalidRepository, NewRepository, RepoType, Repository, RepositorySpec, SettingsError,
};
use packyard_store::db::blobs::{BlobColumn, BlobReferences};
use packyard_store::db::catalogue::ComponentRow;
use packyard_store::db::DbResult;

use crate::catalogue::Catalogue;
use crate::hosted::{Actor, Deletes, UploadError};
use crate::publication::Builders;
use crate::security::keystore::{KeySlot, Moved, RepositoryKeyError, RepositoryKeys};
use crate::services::Services;

/// One format, as the engine sees it.
#[async_trait]
pub trait FormatSpec: Send + Sync + 'static {
    fn format(&self) -> Format;

    /// The columns of the format's own tables that hold blob digests (SHA-256 hex): blob
    /// reclamation keeps every blob one of them names. A column left out here has its blobs
    /// deleted; `shared/tests/storage.rs` fails when a migration adds one no format registers.
    fn blob_columns(&self) -> &'static [BlobColumn];

    /// The format's settings block (`"<format>": {…}`); `None`: it takes none (`{}` or
    /// nothing).
    fn settings(&self) -> Option<&'static dyn SettingsSpec> {
        None
    }

    /// What the format tells the catalogue (and cleanup, and the web UI's component page).
    fn catalogue(&self) -> &'static dyn Catalogue;

    /// Adds the format's builders (one per unit kind it publishes).
    fn builders(&self, services: &Services, builders: Builders) -> Builders;

    /// After a repository was created (`before` None) or its definition changed: what the
    /// format does about it (a renamed distribution's packages follow it) and the publications
    /// it requests now (so that even an empty repository has signed indexes). Returns how many
    /// units were requested: the caller wakes the workers when any were.
    async fn settings_changed(
        &self,
        _services: &Services,
        _before: Option<&Repository>,
        _repo: &Repository,
    ) -> DbResult<usize> {
        Ok(0)
    }

    /// Whether `group` can publish what `member` serves; the error names the member and the
    /// setting to change (a 400 when the group or the member is created or changed: a group
    /// never leaves a member out silently).
    fn check_member(&self, _group: Part<'_>, _member: Part<'_>) -> Result<(), String> {
        Ok(())
    }

    /// What the web UI shows of the format.
    fn ui(&self) -> &dyn FormatUi;

    /// The repository's signing keys, for formats whose repositories sign what they publish.
    fn signing_keys(&self) -> Option<&dyn SigningKeys> {
        None
    }

    /// `packyard-api import <format>`: the import `args` ask for (the format reads `--key` and
    /// its own `--only` choices), or why not; `None`: the format has no importer.
    fn import(&self, _args: crate::import::ImportArgs) -> Option<Result<Box<dyn crate::import::ImportJob>, String>> {
        None
    }

    /// How OSV advisories name the format's packages and order their versions; `None`: no
    /// advisory applies to them.
    fn osv(&self) -> Option<&dyn OsvSpec> {
        None
    }

    /// Whether the format's routes apply a repository's `policy`, and which facets its rules may
    /// use beyond name and version (`licenses`, `architectures`); `None`: a policy is refused.
    fn policy_facets(&self) -> Option<&'static [&'static str]> {
        None
    }

    /// Why a repository of `repo_type` with the format's settings `block` takes no policy in
    /// this format (`None`: it does).
    fn policy_refused(&self, _repo_type: RepoType, _block: Option<&serde_json::Value>) -> Option<String> {
        None
    }

    /// The name a repository's policy (its rules, overrides and exceptions) knows a catalogued
    /// component by, from its `(key, namespace, name)`: the catalogue's name unless the format
    /// splits it (a Go module's path).
    fn policy_name(&self, (_key, _namespace, name): (&str, &str, &str)) -> String {
        name.to_string()
    }

    /// How Nexus's repository API (`/service/rest/v1/repositories/<format>/<type>`) names the
    /// format's settings where its names differ from Packyard's; `None`: the format's block is
    /// the same object under the format's name, both ways.
    fn nexus(&self) -> Option<&dyn NexusShape> {
        None
    }

    /// Where a file a unit of `kind` and `unit` key published is under a repository snapshot:
    /// the path a client asks for, relative to the repository's URL (`None`: no client asks for
    /// it — the snapshot keeps it under a hidden name for its blob). By default the file's own
    /// path, but for a file with a segment that begins with `.` (a group's `.members`, a
    /// composite file's `.parts/`).
    fn snapshot_path(&self, _kind: &str, _unit: &str, file: &str) -> Option<String> {
        visible(file).then(|| file.to_string())
    }

    /// The architecture of a component of `group` made of the files `paths` (what a
    /// replication's `architectures` filter compares); `None` for one that installs on any
    /// (a format without architectures, a package for all of them).
    fn architecture(&self, _group: &str, _paths: &[&str]) -> Option<String> {
        None
    }

    /// Which of a hosted repository's units can be pointed at one of its snapshots (a
    /// rollback, [`crate::admin::rollback`]), and what a person calls one; `None`: none can.
    /// Its builder publishes such a unit with [`crate::publication::Builder::republish`].
    fn rollback(&self) -> Option<Rollback> {
        None
    }

    /// How the format deletes a hosted repository's catalogued components by key (its
    /// `hosted::ByKey`).
    fn deletes(&self) -> &dyn Deletes;

    /// How the format copies and moves catalogued components between hosted repositories (its
    /// `hosted::ByKey`); by default it does not.
    fn copies(&self) -> &dyn crate::hosted::Copies {
        &crate::hosted::NoCopies
    }

    /// What the catalogued components `keys` of `from` depend on that `to` lacks, as keys of
    /// `from`'s components, followed through what those depend on; by default nothing (a copy
    /// `with_dependencies` is refused for a format that has none to follow).
    async fn dependencies(
        &self,
        _services: &Services,
        (from, _to): (&Repository, &Repository),
        _keys: &[String],
    ) -> Result<Vec<String>, UploadError> {
        Err(UploadError::Invalid(format!("{} components are copied without their dependencies", from.format)))
    }

    /// Deletes a hosted repository's catalogued component `key` as the format's own delete does
    /// (rows, republication, audit entry); `asset` may narrow it where a component has parts of
    /// its own. The changes to wait for, or `None` when it was gone already.
    async fn delete_catalogued(
        &self,
        services: &Services,
        repo: &Repository,
        key: &str,
        _asset: Option<&str>,
        actor: Actor<'_>,
    ) -> Result<Option<Vec<(i64, i64)>>, UploadError> {
        let (removed, changes) = self.deletes().delete_components(services, repo, &[key.to_string()], actor).await?;
        Ok((!removed.is_empty()).then_some(changes))
    }
}

/// The units a rollback points at a snapshot ([`FormatSpec::rollback`]).
#[derive(Debug, Clone, Copy)]
pub struct Rollback {
    /// Their kind (the format's index units).
    pub kind: &'static str,
    /// What a person calls one (`distribution`, `branch`).
    pub label: &'static str,
}

/// Whether a published file is one clients ask for: no segment of its path begins with `.`.
pub fn visible(path: &str) -> bool {
    !path.is_empty() && path.split('/').all(|seg| !seg.is_empty() && !seg.starts_with('.'))
}

/// What a Nexus repository request says of the format ([`NexusShape::read`]).
#[derive(Debug, Default)]
pub struct NexusSettings {
    /// The format's settings block, in Packyard's shape (`None`: the request has none).
    pub block: Option<serde_json::Value>,
    /// A private key to import as the repository's signing key (Nexus's `aptSigning.keypair`).
    pub signing_key: Option<String>,
}

/// A format's fields in Nexus's repository API, where they are not Packyard's block as it is.
pub trait NexusShape: Send + Sync {
    /// Reads a Nexus request body's fields of the format into Packyard's block; `Err`: a field
    /// Packyard cannot honour, with what to send instead (a 400).
    fn read(
        &self,
        repo_type: RepoType,
        body: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<NexusSettings, String>;

    /// What Nexus's GET shows of the format, from Packyard's block (`Null` when it has none):
    /// the fields added to the response.
    fn show(&self, repo_type: RepoType, block: &serde_json::Value) -> serde_json::Map<String, serde_json::Value>;
}

/// A repository as [`FormatSpec::check_member`] sees it: stored, or as a request defines it.
#[derive(Debug, Clone, Copy)]
pub struct Part<'a> {
    pub name: &'a str,
    pub repo_type: RepoType,
    pub settings: &'a packyard_model::repos::StoredSettings,
}

impl<'a> Part<'a> {
    pub fn of(repo: &'a Repository) -> Self {
        Self { name: repo.name.as_str(), repo_type: repo.repo_type, settings: &repo.settings }
    }

    pub fn new(repo: &'a packyard_model::repos::NewRepository) -> Self {
        Self { name: repo.name.as_str(), repo_type: repo.repo_type, settings: &repo.settings }
    }

    /// Its settings of format `T` (the defaults when it has none).
    pub fn settings<T: FormatSettings + Default>(&self) -> T {
        self.settings.format::<T>().unwrap_or_default()
    }
}

/// A format's settings type, as the registry uses it ([`SettingsOf`]).
pub trait Settings: FormatSettings {
    /// The block as parsed, checked against the rules for a repository of `repo_type` (with the
    /// format's codec where a key must parse) and completed with its defaults; `None`: nothing
    /// to store.
    fn check(self, repo_type: RepoType) -> Result<Option<Self>, InvalidRepository>;

    /// The block's JSON schema (the admin API's OpenAPI document).
    fn schema() -> serde_json::Value;

    /// The web UI's fields; `None`: none.
    fn form() -> Option<&'static SettingsForm> {
        None
    }
}

/// A format's settings block as the generic code sees it.
pub trait SettingsSpec: Send + Sync {
    /// The block as a request sent it (`None`: none), checked and completed: what to store.
    fn check(
        &self,
        repo_type: RepoType,
        block: Option<serde_json::Value>,
    ) -> Result<Option<serde_json::Value>, SettingsError>;
    fn schema(&self) -> serde_json::Value;
    fn form(&self) -> Option<&'static SettingsForm>;
}

/// The [`SettingsSpec`] of settings type `T`: `&SettingsOf::<T>::SPEC`.
pub struct SettingsOf<T>(std::marker::PhantomData<fn() -> T>);

impl<T> SettingsOf<T> {
    pub const SPEC: Self = Self(std::marker::PhantomData);
}

impl<T: Settings> SettingsSpec for SettingsOf<T> {
    fn check(
        &self,
        repo_type: RepoType,
        block: Option<serde_json::Value>,
    ) -> Result<Option<serde_json::Value>, SettingsError> {
        T::parse(block)?.check(repo_type)?.map(|t| t.block()).transpose()
    }

    fn schema(&self) -> serde_json::Value {
        T::schema()
    }

    fn form(&self) -> Option<&'static SettingsForm> {
        T::form()
    }
}

/// The web UI's fields of a format's settings block, shown for repositories of `types`.
#[derive(Debug, Clone, Copy)]
pub struct SettingsForm {
    pub types: &'static [RepoType],
    pub fields: &'static [FormField],
}

/// How a person types a settings field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// One line of text.
    Text,
    /// A list of words, typed separated by commas, spaces or lines.
    List,
    /// Several lines kept as typed (an armored or PEM key).
    Lines,
    /// A list of objects, one per line: `<name>` or `<name> <value>`, stored as
    /// `{"<name key>": …, "<value key>": …}` (Go's checksum databases: a name and a URL); the
    /// word `none` is the empty list (empty is the default).
    Pairs { name: &'static str, value: &'static str },
}

/// One field of a settings block, and the repository types it applies to.
#[derive(Debug, Clone, Copy)]
pub struct FormField {
    /// The block's key (and, after the format's name, the form field's).
    pub key: &'static str,
    pub label: &'static str,
    pub hint: &'static str,
    pub kind: FieldKind,
    /// The types whose repositories have it; empty: every type of its form.
    pub types: &'static [RepoType],
}

impl FormField {
    const fn of(key: &'static str, label: &'static str, hint: &'static str, kind: FieldKind) -> Self {
        Self { key, label, hint, kind, types: &[] }
    }

    pub const fn text(key: &'static str, label: &'static str, hint: &'static str) -> Self {
        Self::of(key, label, hint, FieldKind::Text)
    }

    pub const fn list(key: &'static str, label: &'static str, hint: &'static str) -> Self {
        Self::of(key, label, hint, FieldKind::List)
    }

    pub const fn lines(key: &'static str, label: &'static str, hint: &'static str) -> Self {
        Self::of(key, label, hint, FieldKind::Lines)
    }

    pub const fn pairs(
        key: &'static str,
        label: &'static str,
        hint: &'static str,
        name: &'static str,
        value: &'static str,
    ) -> Self {
        Self::of(key, label, hint, FieldKind::Pairs { name, value })
    }

    /// The field applies to repositories of these types only.
    pub const fn only(self, types: &'static [RepoType]) -> Self {
        Self { types, ..self }
    }

    /// Whether a repository of type `t` has the field (in `form`).
    pub fn applies(&self, form: &SettingsForm, t: RepoType) -> bool {
        form.types.contains(&t) && (self.types.is_empty() || self.types.contains(&t))
    }

    /// The types the field shows for, of `form`'s.
    pub fn shown_for(&self, form: &SettingsForm) -> Vec<RepoType> {
        form.types.iter().copied().filter(|t| self.types.is_empty() || self.types.contains(t)).collect()
    }

    /// The block's value of what a person typed; `None` when nothing was (the default, or what
    /// is stored, stays).
    pub fn value_of(&self, typed: &str) -> Option<serde_json::Value> {
        let words = |s: &str| -> Vec<String> {
            s.split([',', ' ', '\n', '\r', '\t']).map(str::trim).filter(|x| !x.is_empty()).map(str::to_string).collect()
        };
        let typed = match self.kind {
            FieldKind::Lines => typed.trim_matches(['\r', '\n', ' ']),
            _ => typed.trim(),
        };
        if typed.is_empty() {
            return None;
        }
        Some(match self.kind {
            FieldKind::Text => serde_json::json!(typed),
            FieldKind::Lines => serde_json::json!(format!("{}\n", typed.replace("\r\n", "\n"))),
            FieldKind::List => serde_json::json!(words(typed)),
            FieldKind::Pairs { .. } if typed == "none" => serde_json::json!([]),
            FieldKind::Pairs { name, value } => serde_json::Value::Array(
                typed
                    .lines()
                    .filter_map(|line| {
                        let mut parts = line.split_whitespace();
                        let mut item = serde_json::Map::new();
                        item.insert(name.into(), serde_json::json!(parts.next()?));
                        if let Some(v) = parts.next() {
                            item.insert(value.into(), serde_json::json!(v));
                        }
                        Some(serde_json::Value::Object(item))
                    })
                    .collect(),
            ),
        })
    }

    /// What the form shows of a stored value (the inverse of [`FormField::value_of`]).
    pub fn shown(&self, stored: &serde_json::Value) -> String {
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
        match (self.kind, stored.as_array()) {
            (FieldKind::Pairs { .. }, Some(items)) if items.is_empty() => "none".into(),
            (FieldKind::Pairs { name, value }, Some(items)) => items
                .iter()
                .map(|item| match item[value].as_str() {
                    Some(v) => format!("{} {v}", text(&item[name])),
                    None => text(&item[name]),
                })
                .collect::<Vec<_>>()
                .join("\n"),
            (_, Some(items)) => items.iter().filter_map(serde_json::Value::as_str).collect::<Vec<_>>().join(", "),
            _ => text(stored),
        }
    }
}

/// A labelled text a person copies (a client's set-up, an install command).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippet {
    pub label: String,
    pub text: String,
}

impl Snippet {
    pub fn new(label: impl Into<String>, text: impl Into<String>) -> Self {
        Self { label: label.into(), text: text.into() }
    }
}

/// What the web UI shows of a format: its words, its own files, and what a person pastes to
/// point a client at a repository or install one component. Paths are relative to the
/// repository's URL; `url` is that URL, absolute, without a trailing `/`.
#[async_trait]
pub trait FormatUi: Send + Sync {
    /// The format's name for people ("Alpine APK").
    fn title(&self) -> &'static str;

    /// The format's word for a catalogue group (APT: "Component").
    fn group_label(&self) -> &'static str;

    /// The format's own files of catalogue group `group`, to open directly.
    fn group_files(&self, _repo: &Repository, _group: &str) -> Vec<String> {
        Vec::new()
    }

    /// The repository's index files, to open directly.
    fn index_files(&self, _repo: &Repository) -> Vec<String> {
        Vec::new()
    }

    /// The format's settings of `repo`, as facts for people: (label, value).
    fn facts(&self, _repo: &Repository) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// How people name a component (Go: the whole module path).
    fn display_name(&self, c: &ComponentRow) -> String {
        c.name.clone()
    }

    /// The part of catalogue group `group` that the client set-up names (APK:
    /// `branch/repository`), when it names one.
    fn setup_group(&self, _group: &str) -> Option<String> {
        None
    }

    /// How to point a client at the repository, computed from what it serves: `groups` is what
    /// [`FormatUi::setup_group`] made of the catalogue groups it holds (deduplicated; empty when
    /// none is known). Uploads are labelled "Upload …" or "Publish …" (a component's page
    /// leaves them out).
    async fn setup(&self, services: &Services, url: &str, repo: &Repository, groups: &[String]) -> Vec<Snippet>;

    /// The command that installs component `c` through `repo`.
    fn install(&self, repo: &Repository, c: &ComponentRow) -> String;
}

/// A request to change a repository's signing key (`PUT …/signing-key`): generate one, or
/// import a private key; what each field means is the format's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyChange {
    #[serde(default)]
    pub generate: bool,
    /// With `generate`: the algorithm, as the format names them.
    #[serde(default)]
    pub algorithm: Option<String>,
    /// The private key to import, in the format's own encoding.
    #[serde(default)]
    pub private_key: Option<String>,
    /// A name the key carries, where the format's keys have one.
    #[serde(default)]
    pub name: Option<String>,
}

/// A key change asked of a format whose keys carry no name, its shape checked by
/// [`KeyChange::request`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRequest<'a> {
    /// Generate a key of this algorithm (one of [`KeyKinds::algorithms`]).
    Generate(&'static str),
    /// Import this private key, in the format's own encoding.
    Import(&'a str),
}

/// The keys a format generates and imports, for [`KeyChange::request`] and its messages.
#[derive(Debug, Clone, Copy)]
pub struct KeyKinds {
    /// What they are called ("APT signing keys").
    pub what: &'static str,
    /// The algorithms it generates, as the API names them, in the order messages list them.
    pub algorithms: &'static [&'static str],
    /// The one generated when none is asked for.
    pub default: &'static str,
    /// How an imported key is written, for the message that shows the request's shape.
    pub import: &'static str,
}

impl KeyChange {
    /// The request, when it is one of `{"generate":true}` (optionally with an `algorithm` of
    /// `kinds`) or `{"private_key":…}`, without a `name`; otherwise a 400 that shows the shape.
    pub fn request(&self, kinds: &KeyKinds) -> Result<KeyRequest<'_>, KeyError> {
        let listed = |quote: &str| {
            let all: Vec<String> = kinds.algorithms.iter().map(|a| format!("{quote}{a}{quote}")).collect();
            match all.split_last() {
                Some((last, [])) => last.clone(),
                Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                None => String::new(),
            }
        };
        if self.name.is_some() {
            return Err(KeyError::Invalid(format!("`name` does not apply to {}: they carry no name", kinds.what)));
        }
        match (self.generate, self.private_key.as_deref()) {
            (true, None) => match self.algorithm.as_deref() {
                None => Ok(KeyRequest::Generate(kinds.default)),
                Some(asked) => {
                    kinds.algorithms.iter().find(|a| **a == asked).map(|a| KeyRequest::Generate(a)).ok_or_else(|| {
                        KeyError::Invalid(format!(
                            "algorithm {asked:?} is not available for {}: use {}",
                            kinds.what,
                            listed("")
                        ))
                    })
                }
            },
            (false, Some(_)) if self.algorithm.is_some() => {
                Err(KeyError::Invalid("`algorithm` applies to {\"generate\":true}, not to an imported key".into()))
            }
            (false, Some(key)) => Ok(KeyRequest::Import(key)),
            _ => Err(KeyError::Invalid(format!(
                "send either {{\"generate\":true}} (optionally with \"algorithm\": {}) or {{\"private_key\":\"{}\"}}",
                listed("\""),
                kinds.import
            ))),
        }
    }
}

/// Why a signing-key request failed.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The request cannot be done as sent (400).
    #[error("{0}")]
    Invalid(String),
    /// A name the request gives is not one a repository's setting may have (400).
    #[error(transparent)]
    Name(#[from] packyard_model::repos::InvalidRepository),
    /// The database refused or could not be reached (as the API answers a `DbError`).
    #[error(transparent)]
    Db(#[from] packyard_store::db::DbError),
    /// The repository's state forbids it (409).
    #[error("{0}")]
    Conflict(String),
    /// No such key (404).
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Internal(String),
}

impl KeyError {
    pub fn internal(e: impl std::fmt::Display) -> Self {
        Self::Internal(e.to_string())
    }
}

/// What a key change did.
#[derive(Debug, Clone)]
pub struct KeyChanged {
    /// The audit entry's detail.
    pub audit: serde_json::Value,
    /// The new key's public part, as [`SigningKeys::describe`] shows it; `None`: describe it.
    pub key: Option<serde_json::Value>,
}

/// A format's signing keys, behind the admin API's generic key routes.
#[async_trait]
pub trait SigningKeys: Send + Sync {
    /// What holds the keys, for people ("APT", "Go (checksum database)").
    fn label(&self) -> &'static str;

    /// Where clients fetch the new public key after a rotation (`gpg.key`), when the web UI
    /// offers to rotate; `None`: it does not.
    fn rotation_note(&self) -> Option<&'static str> {
        None
    }

    /// Why `repo` has no key of its own, or `None`: by default, a proxy serves its upstream's
    /// signatures.
    fn refuse(&self, repo: &Repository) -> Option<String> {
        (repo.repo_type == RepoType::Proxy).then(|| {
            format!("repository {} is a proxy: it serves its upstream's signatures and has no signing key", repo.name)
        })
    }

    /// The key's public part as the API shows it (a JSON object; never the private key).
    /// `repository_url` is the repository's absolute URL, without a trailing `/`.
    async fn describe(
        &self,
        services: &Services,
        repo: &Repository,
        repository_url: &str,
    ) -> Result<serde_json::Value, KeyError>;

    /// Installs a generated or imported key (and re-signs what needs it).
    async fn change(
        &self,
        services: &Services,
        repo: &Repository,
        repository_url: &str,
        change: &KeyChange,
    ) -> Result<KeyChanged, KeyError>;

    /// Every key the repository has (`GET …/signing-keys`), the signing ones first: each its
    /// public part, `fingerprint`, `slot`, whether it `signs`, and when it `expires_at`.
    async fn keys(&self, _services: &Services, _repo: &Repository) -> Result<Vec<KeyInfo>, KeyError> {
        Err(KeyError::Invalid(format!("{} keys do not rotate with an overlap", self.label())))
    }

    /// Adds a generated or imported key beside the current one (`POST …/signing-keys`): both
    /// sign until one is retired.
    async fn add(&self, _services: &Services, _repo: &Repository, _change: &KeyChange) -> Result<KeyChanged, KeyError> {
        Err(KeyError::Invalid(format!("{} keys do not rotate with an overlap", self.label())))
    }

    /// Retires the key of `fingerprint` (`DELETE …/signing-keys/{fingerprint}`).
    async fn retire(
        &self,
        _services: &Services,
        _repo: &Repository,
        _fingerprint: &str,
    ) -> Result<KeyChanged, KeyError> {
        Err(KeyError::Invalid(format!("{} keys do not rotate with an overlap", self.label())))
    }
}

/// One of a repository's keys as the API and the UI show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KeyInfo {
    pub fingerprint: String,
    pub slot: crate::security::keystore::KeySlot,
    /// Whether it signs what is published (the current key, and the overlap's).
    pub signs: bool,
    /// When it expires (RFC 3339), if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// The same, in seconds since the epoch (for the gauge and the warning).
    #[serde(skip)]
    pub expires_secs: Option<i64>,
    /// The format's public description of it (`algorithm`, `public_key`, APK's `key_name`).
    #[serde(flatten)]
    pub public: serde_json::Map<String, serde_json::Value>,
}

/// How long before a key expires it is warned about (the metric's alert and the UI).
pub const KEY_EXPIRY_WARNING_SECS: i64 = 30 * 86_400;

impl KeyInfo {
    /// Whether it expires within [`KEY_EXPIRY_WARNING_SECS`] of `now_secs` (or has expired).
    pub fn expires_soon(&self, now_secs: i64) -> bool {
        self.expires_secs.is_some_and(|at| at - now_secs <= KEY_EXPIRY_WARNING_SECS)
    }
}

/// Keys that rotate with an overlap (APT's and APK's): a new key signs from now on, the one
/// before stays offered to clients, and every publication unit of the repository is rebuilt and
/// re-signed. A format says how it makes, keeps and shows its keys; [`Rotating`] is the
/// [`SigningKeys`] around them — the request's checks, generation off the executor, the rebuild,
/// the replicas told, the audit entry's detail.
#[async_trait]
pub trait RotatingKeys: Send + Sync {
    type Key: Send + 'static;

    /// The keys it generates and imports.
    fn kinds(&self) -> &'static KeyKinds;

    /// What holds the keys, for people ("APT").
    fn label(&self) -> &'static str;

    /// Where clients fetch the new public key after a rotation (`gpg.key`).
    fn rotation_note(&self) -> &'static str;

    /// A new key of `algorithm` (one of `kinds().algorithms`) for `repo`; run off the executor.
    fn generate(repo: &Repository, algorithm: &'static str) -> Result<Self::Key, String>;

    /// The private key a request imports; an error says why it is not usable (a 400).
    fn import(text: &str) -> Result<Self::Key, String>;

    fn fingerprint(key: &Self::Key) -> Result<String, KeyError>;

    /// Makes `key` the one that signs, the current one the previous.
    async fn install(&self, services: &Services, repo: &Repository, key: &Self::Key) -> Result<(), KeyError>;

    /// Where the key store keeps the format's keys (`apt`: `apt/<repository id>/signing`).
    const STORE: &'static str;

    /// The key as the key store keeps it, and back.
    fn encode(key: &Self::Key) -> Result<Vec<u8>, String>;
    fn decode(bytes: &[u8]) -> Result<Self::Key, String>;

    /// A key's public part as the API shows it (`algorithm`, `public_key`, …).
    fn public(repo: &Repository, key: &Self::Key) -> Result<serde_json::Map<String, serde_json::Value>, KeyError>;

    /// When the key expires (seconds since the epoch); `None`: never.
    fn expires_at(_key: &Self::Key) -> Option<i64> {
        None
    }

    /// The current key's public part as the API shows it, and the previous one's name.
    async fn describe(&self, services: &Services, repo: &Repository) -> Result<serde_json::Value, KeyError>;
}

/// The [`SigningKeys`] of keys that rotate.
pub struct Rotating<K>(pub K);

#[async_trait]
impl<K: RotatingKeys> SigningKeys for Rotating<K> {
    fn label(&self) -> &'static str {
        self.0.label()
    }

    /// A proxy has none, unless its policy has it sign the index it filters.
    fn refuse(&self, repo: &Repository) -> Option<String> {
        (repo.repo_type == RepoType::Proxy && !repo.publishes_merge()).then(|| {
            format!("repository {} is a proxy: it serves its upstream's signatures and has no signing key (a proxy with a policy has one)", repo.name)
        })
    }

    fn rotation_note(&self) -> Option<&'static str> {
        Some(self.0.rotation_note())
    }

    async fn describe(&self, services: &Services, repo: &Repository, _: &str) -> Result<serde_json::Value, KeyError> {
        self.0.describe(services, repo).await
    }

    async fn change(
        &self,
        services: &Services,
        repo: &Repository,
        _: &str,
        change: &KeyChange,
    ) -> Result<KeyChanged, KeyError> {
        // A replacement during a rotation's overlap would drop the key clients were just told
        // to move to.
        let store = RepositoryKeys::new(&services.db, &services.security.keystore, K::STORE, repo.id);
        if store.overlap().await.map_err(KeyError::internal)?.is_some() {
            return Err(KeyError::Conflict(format!(
                "repository {} is in a rotation's overlap (two keys sign): retire one (DELETE /api/v1/repositories/{}/signing-keys/<fingerprint>) before replacing the key",
                repo.name, repo.name
            )));
        }
        let new = self.requested(repo, change).await?;
        self.0.install(services, repo, &new).await?;
        // Replicas drop what they hold of the repository: what they signed themselves (APK's
        // empty indexes of units without a snapshot) carries the old key.
        let units = self.re_sign(services, repo).await?;
        let fingerprint = K::fingerprint(&new)?;
        Ok(KeyChanged { audit: serde_json::json!({"fingerprint": fingerprint, "units_rebuilt": units}), key: None })
    }

    async fn keys(&self, services: &Services, repo: &Repository) -> Result<Vec<KeyInfo>, KeyError> {
        Ok(self.slots(services, repo).await?.1.into_iter().map(|(k, _)| k).collect())
    }

    async fn add(&self, services: &Services, repo: &Repository, change: &KeyChange) -> Result<KeyChanged, KeyError> {
        let in_rotation = |keys: &[(KeyInfo, Vec<u8>)]| {
            let signing: Vec<&str> =
                keys.iter().filter(|(k, _)| k.signs).map(|(k, _)| k.fingerprint.as_str()).collect();
            KeyError::Conflict(format!(
                "repository {} is in a rotation already: {} sign; retire one (DELETE /api/v1/repositories/{}/signing-keys/<fingerprint>) before adding another",
                repo.name,
                signing.join(" and "),
                repo.name
            ))
        };
        // Checked before a key is made (an RSA key takes seconds), and again as it is stored.
        let (_, keys) = self.slots(services, repo).await?;
        if keys.iter().any(|(k, _)| k.slot == KeySlot::Overlap) {
            return Err(in_rotation(&keys));
        }
        let new = self.requested(repo, change).await?;
        let fingerprint = K::fingerprint(&new)?;
        let (store, keys) = self.slots(services, repo).await?;
        if keys.iter().any(|(k, _)| k.fingerprint == fingerprint) {
            return Err(KeyError::Conflict(format!(
                "key {fingerprint} is one of repository {}'s keys already",
                repo.name
            )));
        }
        let encoded = K::encode(&new).map_err(KeyError::Internal)?;
        match store.add(&encoded).await.map_err(KeyError::internal)? {
            Moved::Done => {}
            Moved::Refused => return Err(in_rotation(&keys)),
            Moved::Changed => return Err(changed_meanwhile(repo)),
        }
        let units = self.re_sign(services, repo).await?;
        let beside = keys.iter().find(|(k, _)| k.slot == KeySlot::Current).map(|(k, _)| k.fingerprint.clone());
        Ok(KeyChanged {
            audit: serde_json::json!({"fingerprint": fingerprint, "beside": beside, "units_rebuilt": units}),
            key: None,
        })
    }

    async fn retire(&self, services: &Services, repo: &Repository, fingerprint: &str) -> Result<KeyChanged, KeyError> {
        let (store, keys) = self.slots(services, repo).await?;
        let wanted: String = fingerprint.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_uppercase();
        let Some((key, seen)) = keys.iter().find(|(k, _)| k.fingerprint.eq_ignore_ascii_case(&wanted)) else {
            let known: Vec<&str> = keys.iter().map(|(k, _)| k.fingerprint.as_str()).collect();
            return Err(KeyError::NotFound(format!(
                "repository {} has no key {fingerprint}: its keys are {}",
                repo.name,
                known.join(", ")
            )));
        };
        match store.retire(key.slot, seen).await.map_err(KeyError::internal)? {
            Moved::Done => {}
            Moved::Refused => {
                return Err(KeyError::Conflict(format!(
                    "key {} is the only key that signs repository {}: add its successor first (POST /api/v1/repositories/{}/signing-keys)",
                    key.fingerprint, repo.name, repo.name
                )))
            }
            Moved::Changed => return Err(changed_meanwhile(repo)),
        }
        let units = self.re_sign(services, repo).await?;
        Ok(KeyChanged {
            audit: serde_json::json!({"fingerprint": key.fingerprint, "slot": key.slot, "units_rebuilt": units}),
            key: None,
        })
    }
}

/// Another change moved the repository's keys between reading and writing them.
fn changed_meanwhile(repo: &Repository) -> KeyError {
    KeyError::Conflict(format!(
        "repository {}'s keys changed meanwhile (another key change ran at the same time): list them again (GET /api/v1/repositories/{}/signing-keys) and retry",
        repo.name, repo.name
    ))
}

impl<K: RotatingKeys> Rotating<K> {
    /// The key a request generates (off the executor) or imports.
    async fn requested(&self, repo: &Repository, change: &KeyChange) -> Result<K::Key, KeyError> {
        Ok(match change.request(self.0.kinds())? {
            KeyRequest::Generate(algorithm) => {
                let repo = repo.clone();
                tokio::task::spawn_blocking(move || K::generate(&repo, algorithm))
                    .await
                    .map_err(KeyError::internal)?
                    .map_err(KeyError::Internal)?
            }
            KeyRequest::Import(text) => K::import(text).map_err(KeyError::Invalid)?,
        })
    }

    /// The repository's key store and its keys (the current one made on first need), the
    /// signing ones first, each with its bytes as stored.
    #[allow(clippy::type_complexity)]
    async fn slots<'a>(
        &self,
        services: &'a Services,
        repo: &Repository,
    ) -> Result<(RepositoryKeys<'a>, Vec<(KeyInfo, Vec<u8>)>), KeyError> {
        let store = RepositoryKeys::new(&services.db, &services.security.keystore, K::STORE, repo.id);
        let (made_for, default) = (repo.clone(), self.0.kinds().default);
        let make = move || {
            let key = K::generate(&made_for, default).map_err(|e| RepositoryKeyError::key(std::io::Error::other(e)))?;
            K::encode(&key).map_err(|e| RepositoryKeyError::key(std::io::Error::other(e)))
        };
        let current = store.current(make).await.map_err(KeyError::internal)?;
        let mut stored = vec![(KeySlot::Current, current)];
        if let Some(k) = store.overlap().await.map_err(KeyError::internal)? {
            stored.push((KeySlot::Overlap, k));
        }
        if let Some(k) = store.previous().await.map_err(KeyError::internal)? {
            stored.push((KeySlot::Previous, k));
        }
        let mut out = Vec::with_capacity(stored.len());
        for (slot, bytes) in stored {
            let key = K::decode(&bytes).map_err(KeyError::Internal)?;
            let expires_secs = K::expires_at(&key);
            let info = KeyInfo {
                fingerprint: K::fingerprint(&key)?,
                slot,
                signs: slot != KeySlot::Previous,
                expires_at: expires_secs.map(|s| packyard_model::time::rfc3339_ms(s.saturating_mul(1000))),
                expires_secs,
                public: K::public(repo, &key)?,
            };
            out.push((info, bytes));
        }
        Ok((store, out))
    }

    /// Every unit of the repository rebuilt and re-signed, the replicas told.
    async fn re_sign(&self, services: &Services, repo: &Repository) -> Result<usize, KeyError> {
        let units = services.db.request_rebuild(repo.id, false).await?;
        services.db.touch_repository(repo.id).await?;
        services.changed(crate::events::Changed::Publications);
        services.wake();
        Ok(units)
    }
}

/// A format's packages as OSV's advisories see them.
pub trait OsvSpec: Send + Sync {
    /// The ecosystem (OSV's name, without a release: `Debian` for `Debian:12`).
    fn ecosystem(&self) -> &'static str;

    /// The ecosystem's order of versions, as OSV writes them.
    fn compare(&self, a: &str, b: &str) -> std::cmp::Ordering;

    /// The package name OSV gives a catalogued component (`key`, `namespace`, `name` as the
    /// catalogue has them): its name, unless the format's catalogue splits it.
    fn package(&self, (_key, _namespace, name): (&str, &str, &str)) -> String {
        name.to_string()
    }

    /// A component's version as OSV writes it (the same, unless the format's differs).
    fn osv_version<'a>(&self, version: &'a str) -> std::borrow::Cow<'a, str> {
        std::borrow::Cow::Borrowed(version)
    }

    /// The ecosystem's release a publication unit's packages belong to, as OSV names it after
    /// the colon (`12` of `Debian:12` for `bookworm`, `v3.20` of `Alpine:v3.20`); `None`: not
    /// known, every release's advisories apply.
    fn release_of(&self, _unit: &str) -> Option<String> {
        None
    }

    /// The release a component of `repo` in `namespace` belongs to (its advisories are that
    /// release's): by default [`OsvSpec::release_of`] its namespace (an APK component's is its
    /// unit); `None`: every release's apply.
    fn component_release(&self, _repo: &packyard_model::repos::Repository, namespace: &str) -> Option<String> {
        self.release_of(namespace)
    }
}

/// [`FormatSpec::policy_refused`] of a format whose indexes are signed (APT, APK): a hosted
/// repository publishes what was uploaded (its groups apply a policy); a proxy with a policy
/// signs what it filters with its own key, so it must verify its upstream's signature first
/// (`<format_key>.signed_by`).
pub fn signed_index_policy_refused(
    repo_type: RepoType,
    block: Option<&serde_json::Value>,
    format_key: &str,
) -> Option<String> {
    match repo_type {
        RepoType::Hosted => Some(
            "a hosted repository publishes what was uploaded to it: put it in a group and give the group the policy"
                .into(),
        ),
        RepoType::Proxy if block.and_then(|b| b.get("signed_by")).is_none_or(serde_json::Value::is_null) => Some(format!(
            "a proxy with a policy signs the index it filters with its own key, so it must verify the upstream's first: set {format_key}.signed_by to the upstream's public key"
        )),
        _ => None,
    }
}

/// Every format, registered once.
pub struct Registry {
    /// In the order of `Format::REGISTERED`.
    specs: Vec<&'static dyn FormatSpec>,
    blobs: BlobReferences,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.specs.iter().map(|s| s.format())).finish()
    }
}

impl Registry {
    /// A registry of `specs`. Make one per process (it builds the blob collector's statements):
    /// a `static`. Panics when two specs claim one format or a format has none.
    pub fn new(mut specs: Vec<&'static dyn FormatSpec>) -> Self {
        for format in Format::REGISTERED {
            let n = specs.iter().filter(|s| s.format() == format).count();
            assert_eq!(n, 1, "format {format} must be registered exactly once ({n} specs)");
        }
        specs.sort_by_key(|s| s.format().index());
        let columns: Vec<BlobColumn> = specs.iter().flat_map(|s| s.blob_columns().iter().copied()).collect();
        Self { blobs: BlobReferences::new(&columns), specs }
    }

    /// The spec of `format` (every format has one: [`Registry::new`] checks).
    pub fn get(&self, format: Format) -> &'static dyn FormatSpec {
        // `new` made one spec per format, in the order of `Format::REGISTERED`.
        self.specs[format.index()]
    }

    /// Every registered format's spec ([`Format::REGISTERED`]: the test-only one too).
    pub fn all(&self) -> impl Iterator<Item = &'static dyn FormatSpec> + '_ {
        self.specs.iter().copied()
    }

    /// The specs of the formats people use ([`Format::ALL`]): what lists, forms and the OpenAPI
    /// document offer.
    pub fn offered(&self) -> impl Iterator<Item = &'static dyn FormatSpec> + '_ {
        Format::ALL.into_iter().map(|f| self.get(f))
    }

    /// Whether repositories of `format` may be made: every format people use, and the
    /// test-only one when `test_formats` (`debug.test_format`).
    pub fn check_offered(&self, format: Format, test_formats: bool) -> Result<(), InvalidRepository> {
        if Format::ALL.contains(&format) || test_formats {
            return Ok(());
        }
        Err(InvalidRepository(format!(
            "format {format} is the test-only format: a repository of it is made only with debug.test_format = true"
        )))
    }

    /// What references a blob: the store's own tables and every format's columns.
    pub fn blob_references(&self) -> &BlobReferences {
        &self.blobs
    }

    /// Checks a definition (`path_name`: the repository named by the URL, on update) and makes
    /// what to store: the model's rules, then the format's own settings (`FormatSpec::settings`).
    pub fn validate(&self, spec: RepositorySpec, path_name: Option<&str>) -> Result<NewRepository, SettingsError> {
        let mut new = spec.validate(path_name)?;
        let block = new.settings.blocks.get(new.format.as_str()).cloned();
        let format = new.format;
        let stored = match self.get(format).settings() {
            Some(settings) => settings.check(new.repo_type, block)?,
            None => match block {
                None => None,
                Some(serde_json::Value::Object(fields)) if fields.is_empty() => None,
                Some(_) => {
                    let message = format!("a {format} repository takes no settings: send `{{}}` or leave it out");
                    return Err(SettingsError::Shape { format, message });
                }
            },
        };
        new.settings.set_block(new.format, stored);
        if let Some(policy) = &new.settings.policy {
            self.check_policy((format, new.repo_type, new.settings.blocks.get(format.as_str())), policy)?;
        }
        Ok(new)
    }

    /// Whether `format`'s routes apply `policy` as written: a format that applies none refuses
    /// it, and a rule on a facet its packages do not declare.
    pub fn check_policy(
        &self,
        (format, repo_type, block): (Format, RepoType, Option<&serde_json::Value>),
        policy: &packyard_model::policy::PolicySettings,
    ) -> Result<(), InvalidRepository> {
        let Some(facets) = self.get(format).policy_facets() else {
            return Err(InvalidRepository(format!(
                "`policy` does not apply to {format} repositories (APT, APK, Go and Conan repositories take one)"
            )));
        };
        if let Some(why) = self.get(format).policy_refused(repo_type, block).filter(|_| policy.gates()) {
            return Err(InvalidRepository(format!(
                "`policy` does not apply to {repo_type} repositories of format {format}: {why}"
            )));
        }
        for r in &policy.rules {
            for (facet, used) in [("licenses", !r.licenses.is_empty()), ("architectures", !r.architectures.is_empty())]
            {
                if used && !facets.contains(&facet) {
                    return Err(InvalidRepository(format!(
                        "policy: rule {:?} uses `{facet}`, which {format} packages do not declare to the policy: use `name` and `version`",
                        r.id
                    )));
                }
            }
        }
        Ok(())
    }

    /// Every format's builders added to `builders`.
    pub fn builders(&self, services: &Services, builders: Builders) -> Builders {
        self.specs.iter().fold(builders, |b, spec| spec.builders(services, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_settings_field_reads_what_a_person_typed_and_shows_it_back() {
        let list = FormField::list("architectures", "Architectures", "");
        assert_eq!(list.value_of(" amd64, arm64\nall "), Some(serde_json::json!(["amd64", "arm64", "all"])));
        assert_eq!(list.shown(&serde_json::json!(["amd64", "all"])), "amd64, all");
        assert_eq!(list.value_of("  "), None);
        let key = FormField::lines("signed_by", "Key", "");
        let armored = "-----BEGIN PGP PUBLIC KEY BLOCK-----\r\n\r\nabc\r\n-----END PGP PUBLIC KEY BLOCK-----\r\n";
        let stored = key.value_of(armored);
        assert_eq!(
            stored,
            Some(serde_json::json!(
                "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nabc\n-----END PGP PUBLIC KEY BLOCK-----\n"
            ))
        );
        let dbs = FormField::pairs("checksum_databases", "Databases", "", "name", "url");
        let typed = "sum.golang.org\nsum.example.com https://sum.example.com\n";
        let value = dbs.value_of(typed);
        assert_eq!(
            value,
            Some(
                serde_json::json!([{"name": "sum.golang.org"}, {"name": "sum.example.com", "url": "https://sum.example.com"}])
            )
        );
        assert_eq!(dbs.shown(&value.unwrap_or_default()), typed.trim_end());
        // `none` is the empty list, shown back as such (empty would be the default again).
        assert_eq!(dbs.value_of(" none "), Some(serde_json::json!([])));
        assert_eq!(dbs.shown(&serde_json::json!([])), "none");
        let form = SettingsForm { types: &[RepoType::Hosted, RepoType::Proxy], fields: &[] };
        let proxy_only = key.only(&[RepoType::Proxy]);
        assert!(proxy_only.applies(&form, RepoType::Proxy) && !proxy_only.applies(&form, RepoType::Hosted));
        assert!(!list.applies(&form, RepoType::Group), "the form is not for groups");
        assert_eq!(proxy_only.shown_for(&form), vec![RepoType::Proxy]);
    }

    const KEYS: KeyKinds =
        KeyKinds { what: "test keys", algorithms: &["a1", "b2", "c3"], default: "b2", import: "<key>" };

    fn change(json: serde_json::Value) -> Result<KeyChange, serde_json::Error> {
        serde_json::from_value(json)
    }

    fn refusal(json: serde_json::Value) -> Result<String, serde_json::Error> {
        Ok(match change(json)?.request(&KEYS) {
            Err(KeyError::Invalid(m)) => m,
            other => format!("not refused: {other:?}"),
        })
    }

    #[test]
    fn key_requests_have_one_of_two_shapes() -> Result<(), serde_json::Error> {
        let c = change(serde_json::json!({"generate": true}))?;
        assert_eq!(c.request(&KEYS).ok(), Some(KeyRequest::Generate("b2")));
        let c = change(serde_json::json!({"generate": true, "algorithm": "c3"}))?;
        assert_eq!(c.request(&KEYS).ok(), Some(KeyRequest::Generate("c3")));
        let c = change(serde_json::json!({"private_key": "PEM"}))?;
        assert_eq!(c.request(&KEYS).ok(), Some(KeyRequest::Import("PEM")));
        assert_eq!(
            refusal(serde_json::json!({"generate": true, "algorithm": "d4"}))?,
            "algorithm \"d4\" is not available for test keys: use a1, b2 or c3"
        );
        assert_eq!(
            refusal(serde_json::json!({"private_key": "PEM", "algorithm": "a1"}))?,
            "`algorithm` applies to {\"generate\":true}, not to an imported key"
        );
        assert_eq!(
            refusal(serde_json::json!({"generate": true, "private_key": "PEM"}))?,
            "send either {\"generate\":true} (optionally with \"algorithm\": \"a1\", \"b2\" or \"c3\") or {\"private_key\":\"<key>\"}"
        );
        assert_eq!(refusal(serde_json::json!({}))?, refusal(serde_json::json!({"generate": false}))?);
        assert_eq!(
            refusal(serde_json::json!({"generate": true, "name": "n"}))?,
            "`name` does not apply to test keys: they carry no name"
        );
        Ok(())
    }
}
