//! The repository model: formats, types, settings, write policy, and the rules a repository
//! definition must satisfy. The admin API and tests call [`RepositoryService`]; storage lives in
//! `db::repositories`.

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A repository's format. The sample format is the test-only one: the smallest format, kept to
/// prove that the engine's generic paths serve a fifth format; a repository of it is made only
/// with `debug.test_format = true`, and no list for people names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Apt,
    Apk,
    Go,
    Conan,
    Sample,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RepoType {
    Hosted,
    Proxy,
    Group,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WritePolicy {
    #[default]
    AllowOnce,
    Allow,
    Deny,
}

macro_rules! string_enum {
    ($t:ty { $($v:ident => $s:literal),* }) => {
        impl $t {
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$v => $s),* }
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s { $($s => Ok(Self::$v),)* _ => Err(s.to_string()) }
            }
        }
    };
}
string_enum!(Format { Apt => "apt", Apk => "apk", Go => "go", Conan => "conan", Sample => "sample" });

impl Format {
    /// Every format people use, in the order they see them listed.
    pub const ALL: [Format; 4] = [Format::Apt, Format::Apk, Format::Go, Format::Conan];
    /// Every format the engine registers: [`Format::ALL`] and the test-only one.
    pub const REGISTERED: [Format; 5] = [Format::Apt, Format::Apk, Format::Go, Format::Conan, Format::Sample];

    /// The format's place in [`Format::REGISTERED`] (and in [`Format::ALL`] when listed there).
    pub fn index(self) -> usize {
        self as usize
    }

    /// Every format's name for people, the last after `last` ("apt, apk, go or conan").
    pub fn listed(last: &str) -> String {
        let names: Vec<&str> = Self::ALL.iter().map(|f| f.as_str()).collect();
        match names.split_last() {
            Some((tail, rest)) if !rest.is_empty() => format!("{} {last} {tail}", rest.join(", ")),
            _ => names.join(", "),
        }
    }
}
/// Any registered format's name; a name that is none of them is refused naming only the formats
/// people use.
impl<'de> Deserialize<'de> for Format {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<str>::deserialize(d)?;
        name.parse().map_err(|_| {
            let names: Vec<String> = Self::ALL.iter().map(|f| format!("`{f}`")).collect();
            serde::de::Error::custom(format!("unknown variant `{name}`, expected one of {}", names.join(", ")))
        })
    }
}
string_enum!(RepoType { Hosted => "hosted", Proxy => "proxy", Group => "group" });
string_enum!(WritePolicy { AllowOnce => "allow_once", Allow => "allow", Deny => "deny" });

/// A repository name: `[A-Za-z0-9._-]{1,64}`, and not `.` or `..` (it is a URL path segment).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct RepoName(String);

impl RepoName {
    pub fn parse(s: &str) -> Result<Self, InvalidRepository> {
        let ok_chars = s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if s.is_empty() || s.len() > 64 || !ok_chars {
            return Err(InvalidRepository(format!(
                "invalid repository name {:?}: use 1 to 64 characters from A-Z, a-z, 0-9, '.', '_' and '-'",
                truncate(s)
            )));
        }
        if s.bytes().all(|b| b == b'.') {
            return Err(InvalidRepository(format!("invalid repository name {s:?}: it cannot be only dots")));
        }
        Ok(Self(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RepoName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// At most 80 characters of `s`, to quote in a message.
pub fn truncate(s: &str) -> String {
    s.chars().take(80).collect()
}

/// A format's settings: the block of a repository definition under the format's name (`"apt":
/// {…}`), its type in the format's own folder. Stored as the format made it; read back with
/// [`FormatSettings::of`].
pub trait FormatSettings: Serialize + DeserializeOwned + Default + Clone + Send + Sync + 'static {
    /// The format whose block this is.
    const FORMAT: Format;

    /// The block as a request sent it (`None`: none, so the defaults); one that is not of this
    /// shape is refused with serde's words ([`SettingsError::Shape`]).
    fn parse(block: Option<serde_json::Value>) -> Result<Self, SettingsError> {
        match block {
            None => Ok(Self::default()),
            Some(v) => serde_json::from_value(v)
                .map_err(|e| SettingsError::Shape { format: Self::FORMAT, message: e.to_string() }),
        }
    }

    /// The block to store.
    fn block(&self) -> Result<serde_json::Value, SettingsError> {
        serde_json::to_value(self)
            .map_err(|e| InvalidRepository(format!("`{}` settings cannot be stored: {e}", Self::FORMAT)).into())
    }

    /// `repo`'s settings of this format: its defaults when it stores none.
    fn of(repo: &Repository) -> Self {
        repo.settings.format::<Self>().unwrap_or_default()
    }

    /// The same, borrowed from the repository's parsed block (no copy: for the read paths).
    fn get(repo: &Repository) -> std::borrow::Cow<'_, Self> {
        repo.settings
            .format_ref::<Self>()
            .map_or_else(|| std::borrow::Cow::Owned(Self::default()), std::borrow::Cow::Borrowed)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxySettings {
    pub remote_url: String,
    /// How long fetched metadata (indexes, lists) is served before it is revalidated upstream.
    #[serde(default = "default_metadata_ttl")]
    pub metadata_ttl_secs: u64,
    /// How long an upstream 404/410 is remembered.
    #[serde(default = "default_negative_ttl")]
    pub negative_ttl_secs: u64,
    /// Upstream credentials (HTTP Basic on every upstream request), optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// The password as sent to the admin API: sealed before it is stored, never returned.
    #[serde(default, skip_serializing)]
    pub password: Option<String>,
    /// The password sealed with `security.secret` (nonce, ciphertext): what is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_sealed: Option<(String, String)>,
    /// No upstream traffic at all: what was cached is served (however old), the rest is a 404.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub offline: bool,
    /// How long past its freshness (`metadata_ttl_secs`) a cached copy may still be served when
    /// the upstream fails; without it, however long. Never an APT index past its `Valid-Until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_stale_secs: Option<u64>,
}

impl ProxySettings {
    /// The key store name a repository's upstream password is sealed under.
    pub fn password_key(repository: &str) -> String {
        format!("proxy/{repository}/password")
    }
}

fn default_metadata_ttl() -> u64 {
    3600
}
fn default_negative_ttl() -> u64 {
    300
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupSettings {
    pub members: Vec<String>,
}

/// What is stored in the `settings` column: the format's block under its name (as the
/// format's spec made it) and the proxy block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSettings {
    /// The format's block, under the format's name (at most one entry).
    #[serde(flatten)]
    pub blocks: BTreeMap<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxySettings>,
    /// The gate (`policy.*`): release age, quarantine rules, vulnerabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<crate::policy::PolicySettings>,
    /// Snapshots made on a schedule, and how many of them are kept (`snapshots.*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshots: Option<SnapshotSchedule>,
    /// A hosted repository that follows another Packyard's repository (`replication.*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<Box<Replication>>,
    /// Storage limits (`quota.soft_bytes`, `quota.hard_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<crate::quota::Quota>,
    /// The block as its type, parsed on first use (repositories are cached as `Arc`s).
    #[serde(skip)]
    parsed: Parsed,
}

impl StoredSettings {
    /// The block of `T`'s format, parsed once; `None` when there is none or it no longer
    /// parses (reported once).
    pub fn format<T: FormatSettings>(&self) -> Option<T> {
        self.blocks.get(T::FORMAT.as_str())?;
        match self.cached::<T>() {
            Some(t) => t.clone(),
            None => self.parse::<T>(),
        }
    }

    /// [`StoredSettings::format`], borrowed from the parsed block.
    pub fn format_ref<T: FormatSettings>(&self) -> Option<&T> {
        // An absent block leaves the cache alone: only the repository's own format has one.
        self.blocks.get(T::FORMAT.as_str())?;
        self.cached::<T>()?.as_ref()
    }

    /// The parsed block, when the cache holds `T`'s (it holds the first one asked for).
    fn cached<T: FormatSettings>(&self) -> Option<&Option<T>> {
        self.parsed.0.get_or_init(|| Arc::new(self.parse::<T>())).downcast_ref::<Option<T>>()
    }

    fn parse<T: FormatSettings>(&self) -> Option<T> {
        let block = self.blocks.get(T::FORMAT.as_str())?;
        match serde_json::from_value(block.clone()) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::error!(format = %T::FORMAT, error = %e, "stored format settings do not parse; the defaults apply");
                None
            }
        }
    }

    /// Sets the block of `format` (`None`: removes it).
    pub fn set_block(&mut self, format: Format, block: Option<serde_json::Value>) {
        match block {
            Some(b) => self.blocks.insert(format.as_str().to_string(), b),
            None => self.blocks.remove(format.as_str()),
        };
        self.parsed = Parsed::default();
    }
}

/// A parsed format block, beside the JSON it was read from (which alone is compared).
#[derive(Clone, Default)]
struct Parsed(OnceLock<Arc<dyn Any + Send + Sync>>);

impl PartialEq for Parsed {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Parsed {}
impl fmt::Debug for Parsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("..")
    }
}

/// A repository's snapshots made on a schedule (`snapshots.every_secs`), each named by the
/// start of its period (`20261206T000000Z` for a daily one), of which the newest `keep` are kept;
/// snapshots made on request are kept until deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotSchedule {
    /// How often (seconds, 60 to a year); `None`: none on a schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_secs: Option<u64>,
    /// How many of the scheduled snapshots are kept, newest first (1 to 10,000); `None`: all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<u64>,
}

impl SnapshotSchedule {
    pub fn validate(&self) -> Result<(), InvalidRepository> {
        if let Some(every) = self.every_secs {
            if !(60..=366 * 86_400).contains(&every) {
                return Err(InvalidRepository(format!(
                    "`snapshots.every_secs` {every} is not between 60 (a minute) and 31622400 (a year)"
                )));
            }
        }
        if let Some(keep) = self.keep {
            if !(1..=10_000).contains(&keep) {
                return Err(InvalidRepository(format!("`snapshots.keep` {keep} is not between 1 and 10000")));
            }
        }
        Ok(())
    }
}

/// Pull replication (#42): a hosted repository that keeps a full copy of another Packyard's
/// repository (or of one of its snapshots), asking every `every_secs`, of what the filters keep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replication {
    /// The source instance's root URL (`https://packyard.example.org/`).
    pub url: String,
    /// The source repository; by default one of this repository's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// One of its snapshots instead of the repository as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// Component names to keep (`*` matches any run of characters); all by default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// Architectures to keep (a component of none, or of `all`/`noarch`, is kept); all by
    /// default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub architectures: Vec<String>,
    /// Of each name, only the newest this many versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest: Option<u32>,
    /// How often the source is asked (seconds, 1 to 86400).
    #[serde(default = "default_replication_every")]
    pub every_secs: u64,
    /// The source instance's bundle key (its fingerprint or public key) its manifests must be
    /// signed with; any valid signature without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Credentials on the source (HTTP Basic), for a repository it does not let anonymous
    /// users read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// The password as sent to the admin API: sealed before it is stored, never returned.
    #[serde(default, skip_serializing)]
    pub password: Option<String>,
    /// The password sealed with `security.secret` (nonce, ciphertext): what is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_sealed: Option<(String, String)>,
}

impl Replication {
    /// The key store name a repository's source password is sealed under.
    pub fn password_key(repository: &str) -> String {
        format!("replication/{repository}/password")
    }
}

fn default_replication_every() -> u64 {
    60
}

impl Replication {
    pub fn validate(&self, t: RepoType) -> Result<(), InvalidRepository> {
        if t != RepoType::Hosted {
            return Err(InvalidRepository(format!(
                "`replication` makes a hosted repository follow another: not a {t} one"
            )));
        }
        check_url("`replication.url`", &self.url)?;
        // Over plain HTTP nothing but the key says the manifest is the source's.
        if self.url.starts_with("http://") && self.key.is_none() {
            return Err(InvalidRepository(
                "`replication.url` is plain http: give `replication.key` (the source instance's fingerprint, which `packyard-api export` prints in its manifest's `instance`), or use https".into(),
            ));
        }
        if self.url.starts_with("http://") && (self.password.is_some() || self.password_sealed.is_some()) {
            return Err(InvalidRepository(
                "`replication.password` over plain http would be sent in clear: use an https `replication.url`, or a source repository anonymous users may read".into(),
            ));
        }
        if !(1..=86_400).contains(&self.every_secs) {
            return Err(InvalidRepository(format!(
                "`replication.every_secs` {} is not between 1 and 86400",
                self.every_secs
            )));
        }
        if self.newest == Some(0) {
            return Err(InvalidRepository("`replication.newest` is at least 1".into()));
        }
        Ok(())
    }
}

/// The format blocks of a request body: every field of it that is not one of the definition's
/// own, each of which must be a format's name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FormatBlocks(pub BTreeMap<String, serde_json::Value>);

impl<'de> Deserialize<'de> for FormatBlocks {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut blocks = BTreeMap::<String, serde_json::Value>::deserialize(d)?;
        if let Some(key) = blocks.keys().find(|k| k.parse::<Format>().is_err()) {
            let formats: Vec<String> = Format::ALL.iter().map(|f| format!("`{f}`")).collect();
            return Err(serde::de::Error::custom(format!(
                "unknown field `{key}`, expected one of `name`, `format`, `type`, `write_policy`, `anonymous_read`, `proxy`, `group`, `policy`, `snapshots`, `replication`, `quota` or a format's settings ({})",
                formats.join(", ")
            )));
        }
        // `"apt": null` is no block, as an absent optional field is.
        blocks.retain(|_, v| !v.is_null());
        Ok(Self(blocks))
    }
}

/// The admin API's request body for create and update. Unknown fields are refused as it is
/// read ([`FormatBlocks`]).
#[derive(Debug, Clone, Deserialize)]
pub struct RepositorySpec {
    #[serde(default)]
    pub name: Option<String>,
    pub format: Format,
    #[serde(rename = "type")]
    pub repo_type: RepoType,
    #[serde(default)]
    pub write_policy: Option<WritePolicy>,
    #[serde(default)]
    pub anonymous_read: Option<bool>,
    #[serde(default)]
    pub proxy: Option<ProxySettings>,
    #[serde(default)]
    pub group: Option<GroupSettings>,
    #[serde(default)]
    pub policy: Option<crate::policy::PolicySettings>,
    #[serde(default)]
    pub snapshots: Option<SnapshotSchedule>,
    #[serde(default)]
    pub replication: Option<Replication>,
    #[serde(default)]
    pub quota: Option<crate::quota::Quota>,
    /// The format's settings, under its name (`"apt": {…}`): checked by the format's spec.
    #[serde(flatten)]
    pub formats: FormatBlocks,
}

/// A stored repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    pub id: i64,
    pub name: RepoName,
    pub format: Format,
    pub repo_type: RepoType,
    pub settings: StoredSettings,
    pub write_policy: WritePolicy,
    pub anonymous_read: bool,
    /// Group members in order (empty unless a group).
    pub members: Vec<String>,
    /// The repository watermark: bumped on every change that replicas must notice.
    pub version: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Repository {
    /// Its storage quota, when one is set.
    pub fn quota(&self) -> Option<&crate::quota::Quota> {
        self.settings.quota.as_ref().filter(|q| q.is_set())
    }

    /// Its policy, when the policy can keep anything back.
    pub fn gate(&self) -> Option<&crate::policy::PolicySettings> {
        self.settings.policy.as_ref().filter(|p| p.gates())
    }

    /// Whether the repository's publications merge members' indexes: a group's, and a proxy's
    /// with a policy (its upstream its one member: it signs what the policy lets through, where
    /// a format publishes signed indexes).
    pub fn publishes_merge(&self) -> bool {
        self.repo_type == RepoType::Group || (self.repo_type == RepoType::Proxy && self.gate().is_some())
    }
}

/// A validated definition, ready to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRepository {
    pub name: RepoName,
    pub format: Format,
    pub repo_type: RepoType,
    pub settings: StoredSettings,
    pub write_policy: WritePolicy,
    pub anonymous_read: bool,
    pub members: Vec<RepoName>,
}

/// Why a format's settings block is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SettingsError {
    /// It is not of the shape of the format's settings (an unknown field, a wrong type): serde's
    /// words, which the caller places (a PATCH says "the patched definition is invalid").
    Shape { format: Format, message: String },
    /// Of the shape, but against a rule: the message says what to change.
    Invalid(InvalidRepository),
}

impl From<InvalidRepository> for SettingsError {
    fn from(e: InvalidRepository) -> Self {
        Self::Invalid(e)
    }
}

impl SettingsError {
    /// As a definition's error: a shape error after `shape_prefix` (`None`: "invalid `<format>`
    /// settings").
    pub fn into_invalid(self, shape_prefix: Option<&str>) -> InvalidRepository {
        match self {
            Self::Invalid(e) => e,
            Self::Shape { format, message } => match shape_prefix {
                Some(prefix) => InvalidRepository(format!("{prefix}: {message}")),
                None => InvalidRepository(format!("invalid `{format}` settings: {message}")),
            },
        }
    }
}

/// Why a repository definition is refused: the message says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidRepository(pub String);

/// `value` is 1 to 64 characters from A-Z, a-z, 0-9, '.', '_' and '-', not only dots.
pub fn check_token(what: &str, value: &str) -> Result<(), InvalidRepository> {
    check_segment(what, value, 64, "")
}

/// `value` is 1 to `max` characters from A-Z, a-z, 0-9, '.', '_' and '-', not only dots (a URL
/// path segment); the refusal ends with `example`.
pub fn check_segment(what: &str, value: &str, max: usize, example: &str) -> Result<(), InvalidRepository> {
    let ok = !value.is_empty()
        && value.len() <= max
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && !value.bytes().all(|b| b == b'.');
    if ok {
        Ok(())
    } else {
        Err(InvalidRepository(format!(
            "invalid {what} {:?}: use 1 to {max} characters from A-Z, a-z, 0-9, '.', '_' and '-'{example}",
            truncate(value)
        )))
    }
}

/// A non-empty list of [`check_token`] values, each once.
pub fn check_list(what: &str, values: &[String]) -> Result<(), InvalidRepository> {
    if values.is_empty() {
        return Err(InvalidRepository(format!("{what} must not be empty")));
    }
    let mut seen = BTreeSet::new();
    for v in values {
        check_token(what, v)?;
        if !seen.insert(v) {
            return Err(InvalidRepository(format!("{what} lists {v:?} twice")));
        }
    }
    Ok(())
}

impl RepositorySpec {
    /// Checks everything that does not need the database and produces the definition to store.
    /// `path_name` is the name from the URL on update (the body's name must match or be absent).
    pub fn validate(self, path_name: Option<&str>) -> Result<NewRepository, InvalidRepository> {
        let name = match (path_name, &self.name) {
            (Some(p), Some(b)) if p != b => {
                return Err(InvalidRepository(format!(
                    "the body names repository {b:?} but the URL names {p:?}; a repository cannot be renamed"
                )))
            }
            (Some(p), _) => p.to_string(),
            (None, Some(b)) => b.clone(),
            (None, None) => return Err(InvalidRepository("missing field `name`".into())),
        };
        let name = RepoName::parse(&name)?;
        let f = self.format;
        let mut blocks = self.formats.0;
        if let Some(key) = blocks.keys().find(|k| *k != f.as_str()) {
            return Err(InvalidRepository(format!("`{key}` settings do not apply to a {f} repository")));
        }
        // The format's own block, as sent: its spec checks it and completes it with its
        // defaults (`formats::Registry::validate`).
        let mut settings = StoredSettings::default();
        settings.set_block(f, blocks.remove(f.as_str()));
        let t = self.repo_type;
        match (t, self.proxy, &self.group) {
            (RepoType::Proxy, Some(proxy), None) => {
                check_remote_url(&proxy.remote_url)?;
                settings.proxy = Some(proxy);
            }
            (RepoType::Proxy, None, _) => {
                return Err(InvalidRepository("a proxy repository needs `proxy.remote_url`".into()))
            }
            (RepoType::Group, None, Some(_)) => {}
            (RepoType::Group, None, None) => {
                return Err(InvalidRepository("a group repository needs `group.members`".into()))
            }
            (_, Some(_), _) => {
                return Err(InvalidRepository(format!("`proxy` settings do not apply to a {t} repository")))
            }
            (_, None, Some(_)) => {
                return Err(InvalidRepository(format!("`group` settings do not apply to a {t} repository")))
            }
            (RepoType::Hosted, None, None) => {}
        }
        if let Some(policy) = self.policy {
            policy.validate()?;
            settings.policy = Some(policy);
        }
        if let Some(schedule) = self.snapshots {
            schedule.validate()?;
            settings.snapshots = Some(schedule);
        }
        if let Some(replication) = self.replication {
            replication.validate(t)?;
            settings.replication = Some(Box::new(replication));
        }
        if let Some(quota) = self.quota.filter(crate::quota::Quota::is_set) {
            if t == RepoType::Group {
                return Err(InvalidRepository(
                    "`quota` does not apply to a group repository: it holds nothing of its own (set it on its members)"
                        .into(),
                ));
            }
            quota.validate("quota").map_err(InvalidRepository)?;
            settings.quota = Some(quota);
        }
        let mut members = Vec::new();
        if let Some(group) = self.group {
            let mut seen = BTreeSet::new();
            for m in &group.members {
                let member = RepoName::parse(m).map_err(|_| {
                    InvalidRepository(format!("group member {:?} is not a valid repository name", truncate(m)))
                })?;
                if member == name {
                    return Err(InvalidRepository(format!("group {name} cannot contain itself")));
                }
                if !seen.insert(member.clone()) {
                    return Err(InvalidRepository(format!("group member {member} is listed twice")));
                }
                members.push(member);
            }
        }
        Ok(NewRepository {
            name,
            format: f,
            repo_type: t,
            settings,
            write_policy: self.write_policy.unwrap_or_default(),
            anonymous_read: self.anonymous_read.unwrap_or(true),
            members,
        })
    }
}

/// PATCH: the definition `current` (as the admin API's GET shows it, read-only fields
/// included) with the JSON merge patch (RFC 7396) applied, as a request body to validate.
pub fn patched(mut current: serde_json::Value, patch: &serde_json::Value) -> Result<RepositorySpec, InvalidRepository> {
    if !patch.is_object() {
        return Err(InvalidRepository("a merge patch is a JSON object of the fields to change".into()));
    }
    for read_only in ["url", "version", "created_at", "updated_at"] {
        if let Some(v) = patch.get(read_only) {
            if current.get(read_only) != Some(v) {
                return Err(InvalidRepository(format!("`{read_only}` is read-only")));
            }
        }
        if let Some(o) = current.as_object_mut() {
            o.remove(read_only);
        }
    }
    merge_patch(&mut current, patch);
    serde_json::from_value(current).map_err(|e| InvalidRepository(format!("the patched definition is invalid: {e}")))
}

/// Applies a JSON merge patch (RFC 7396) to `target`: objects merge key by key, `null` removes
/// a key, anything else replaces what was there.
pub fn merge_patch(target: &mut serde_json::Value, patch: &serde_json::Value) {
    let serde_json::Value::Object(fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = serde_json::Value::Object(serde_json::Map::new());
    }
    if let serde_json::Value::Object(t) = target {
        for (k, v) in fields {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(serde_json::Value::Null), v);
            }
        }
    }
}

/// Only http(s) URLs with a host; credentials belong in settings, not in the URL.
fn check_remote_url(raw: &str) -> Result<(), InvalidRepository> {
    check_url("proxy.remote_url", raw)
}

/// An http(s) URL with a host and no credentials.
pub fn check_url(key: &str, raw: &str) -> Result<(), InvalidRepository> {
    let url = url::Url::parse(raw)
        .map_err(|e| InvalidRepository(format!("{key} {:?} is not a valid URL: {e}", truncate(raw))))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(InvalidRepository(format!("{key} must use http or https, not {:?}", url.scheme())));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(InvalidRepository(format!("{key} has no host")));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(InvalidRepository(format!("{key} must not carry credentials")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: serde_json::Value) -> Result<RepositorySpec, serde_json::Error> {
        serde_json::from_value(json)
    }

    #[test]
    fn merge_patches_follow_rfc_7396() {
        // The examples of RFC 7396, appendix A.
        let cases = [
            (r#"{"a":"b"}"#, r#"{"a":"c"}"#, r#"{"a":"c"}"#),
            (r#"{"a":"b"}"#, r#"{"b":"c"}"#, r#"{"a":"b","b":"c"}"#),
            (r#"{"a":"b"}"#, r#"{"a":null}"#, r#"{}"#),
            (r#"{"a":"b","b":"c"}"#, r#"{"a":null}"#, r#"{"b":"c"}"#),
            (r#"{"a":["b"]}"#, r#"{"a":"c"}"#, r#"{"a":"c"}"#),
            (r#"{"a":"c"}"#, r#"{"a":["b"]}"#, r#"{"a":["b"]}"#),
            (r#"{"a":{"b":"c"}}"#, r#"{"a":{"b":"d","c":null}}"#, r#"{"a":{"b":"d"}}"#),
            (r#"{"a":[{"b":"c"}]}"#, r#"{"a":[1]}"#, r#"{"a":[1]}"#),
            (r#"["a","b"]"#, r#"["c","d"]"#, r#"["c","d"]"#),
            (r#"{"a":"b"}"#, r#"["c"]"#, r#"["c"]"#),
            (r#"{"a":"foo"}"#, r#"null"#, r#"null"#),
            (r#"{"a":"foo"}"#, r#""bar""#, r#""bar""#),
            (r#"{"e":null}"#, r#"{"a":1}"#, r#"{"e":null,"a":1}"#),
            (r#"[1,2]"#, r#"{"a":"b","c":null}"#, r#"{"a":"b"}"#),
            (r#"{}"#, r#"{"a":{"bb":{"ccc":null}}}"#, r#"{"a":{"bb":{}}}"#),
        ];
        for (target, patch, want) in cases {
            let mut t: serde_json::Value = serde_json::from_str(target).unwrap_or_default();
            let p: serde_json::Value = serde_json::from_str(patch).unwrap_or_default();
            merge_patch(&mut t, &p);
            let want: serde_json::Value = serde_json::from_str(want).unwrap_or_default();
            assert_eq!(t, want, "{target} + {patch}");
        }
    }

    #[test]
    fn names() {
        for ok in ["debs", "a", "A.b_c-9", &"x".repeat(64)] {
            assert!(RepoName::parse(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a b", "ü", &"x".repeat(65), "%2e"] {
            let err = RepoName::parse(bad).err();
            assert!(matches!(err, Some(InvalidRepository(_))), "{bad}");
        }
    }

    fn invalid(json: serde_json::Value) -> String {
        match spec(json) {
            Err(e) => format!("json: {e}"),
            Ok(s) => match s.validate(None) {
                Err(InvalidRepository(m)) => m,
                other => format!("unexpected: {other:?}"),
            },
        }
    }

    #[test]
    fn invalid_definitions_say_why() {
        let m = invalid(serde_json::json!({"name":"p","format":"go","type":"proxy","proxy":{"remote_url":"ftp://x/"}}));
        assert!(m.contains("must use http or https"), "{m}");
        let m = invalid(serde_json::json!({"name":"p","format":"go","type":"proxy"}));
        assert!(m.contains("needs `proxy.remote_url`"), "{m}");
        let m = invalid(serde_json::json!({"name":"p","format":"go","type":"hosted","apt":{}}));
        assert!(m.contains("`apt` settings do not apply to a go repository"), "{m}");
        let m = invalid(serde_json::json!({"name":"g","format":"go","type":"group","group":{"members":["g"]}}));
        assert!(m.contains("cannot contain itself"), "{m}");
        let m = invalid(serde_json::json!({"name":"h","format":"go","type":"hosted","group":{"members":[]}}));
        assert!(m.contains("`group` settings do not apply to a hosted repository"), "{m}");
        let m = invalid(serde_json::json!({"name":"x","format":"npm","type":"hosted"}));
        assert!(m.contains("unknown variant `npm`"), "{m}");
        let m = invalid(serde_json::json!({"name":"x","format":"go","type":"hosted","colour":"red"}));
        assert!(m.starts_with("json: unknown field `colour`"), "{m}");
    }

    #[test]
    fn the_format_block_is_stored_as_sent_for_its_spec_to_check() -> Result<(), Box<dyn std::error::Error>> {
        let body = serde_json::json!({"name":"d","format":"apt","type":"hosted","apt":{"distribution":"sid"}});
        let new = spec(body)?.validate(None)?;
        assert_eq!(new.settings.blocks.get("apt"), Some(&serde_json::json!({"distribution":"sid"})));
        let new = spec(serde_json::json!({"name":"d","format":"apt","type":"hosted"}))?.validate(None)?;
        assert!(new.settings.blocks.is_empty());
        // A null block is no block, as an absent optional field is.
        let new = spec(serde_json::json!({"name":"d","format":"apt","type":"hosted","apt":null,"go":null}))?
            .validate(None)?;
        assert!(new.settings.blocks.is_empty());
        Ok(())
    }
}

#[cfg(test)]
mod format_order {
    use super::Format;

    #[test]
    fn index_is_the_place_in_all() {
        for (i, f) in Format::REGISTERED.into_iter().enumerate() {
            assert_eq!(f.index(), i, "{f}");
        }
        assert_eq!(Format::REGISTERED[..Format::ALL.len()], Format::ALL);
    }

    #[test]
    fn an_unknown_name_is_refused_naming_the_formats_people_use() {
        let e = serde_json::from_value::<Format>(serde_json::json!("npm")).err().map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some("unknown variant `npm`, expected one of `apt`, `apk`, `go`, `conan`"));
        assert_eq!(serde_json::from_value::<Format>(serde_json::json!("sample")).ok(), Some(Format::Sample));
    }
}
