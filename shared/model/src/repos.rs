//! The repository model: formats, types, settings, write policy, and the rules a repository
//! definition must satisfy. The admin API and tests call [`RepositoryService`]; storage lives in
//! `db::repositories`.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Apt,
    Apk,
    Go,
    Conan,
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
string_enum!(Format { Apt => "apt", Apk => "apk", Go => "go", Conan => "conan" });

impl Format {
    /// Every format, in the order people see them listed.
    pub const ALL: [Format; 4] = [Format::Apt, Format::Apk, Format::Go, Format::Conan];

    /// The format's place in [`Format::ALL`].
    pub fn index(self) -> usize {
        self as usize
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

fn truncate(s: &str) -> String {
    s.chars().take(80).collect()
}

/// APT settings (DESIGN §5). `origin`/`label` default to the repository name. A hosted
/// repository publishes, a proxy mirrors and a group publishes each of `distributions`
/// (default: `[distribution]`); a hosted repository's uploads that name no distribution go to
/// `distribution`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AptSettings {
    pub distribution: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub distributions: Vec<String>,
    pub components: Vec<String>,
    pub architectures: Vec<String>,
    pub origin: Option<String>,
    pub label: Option<String>,
    /// Proxy: the upstream archive's armored public key(s). A group verifies the upstream
    /// `InRelease` with it before merging and re-signing the proxy's packages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
}

impl Default for AptSettings {
    fn default() -> Self {
        Self {
            distribution: "stable".into(),
            distributions: Vec::new(),
            components: vec!["main".into()],
            architectures: vec!["amd64".into(), "all".into()],
            origin: None,
            label: None,
            signed_by: None,
        }
    }
}

impl AptSettings {
    /// The distributions a repository publishes (hosted, group) or mirrors (proxy).
    pub fn suites(&self) -> Vec<&str> {
        if self.distributions.is_empty() {
            vec![self.distribution.as_str()]
        } else {
            self.distributions.iter().map(String::as_str).collect()
        }
    }
}

/// APK settings: the architectures packages may be uploaded for (hosted) or are served for
/// (proxy, group).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApkSettings {
    pub architectures: Vec<String>,
    /// Proxy: the upstream's index public key(s), SPKI PEM. A group verifies the upstream
    /// `APKINDEX.tar.gz` signature with them before merging and re-signing its records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_by: Option<String>,
}

impl Default for ApkSettings {
    fn default() -> Self {
        Self { architectures: vec!["x86_64".into(), "aarch64".into()], signed_by: None }
    }
}

/// Conan takes no format settings yet; an empty object is accepted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmptySettings {}

/// Go settings. A hosted or group repository serves a checksum database of its own (its key
/// and name come with its signing key) and takes none yet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoSettings {
    /// Proxy: the checksum databases it serves under `sumdb/<name>/…` (what the go command asks a
    /// GOPROXY for before it would reach a database itself), each fetched through the proxy
    /// cache. Default: `sum.golang.org` through the upstream proxy. `[]`: none, so the go
    /// command verifies against the databases directly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_databases: Option<Vec<ChecksumDatabase>>,
}

/// A checksum database a Go proxy serves to the go command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChecksumDatabase {
    /// Its name, as `GOSUMDB` names it (`sum.golang.org`).
    pub name: String,
    /// Where it answers (`https://sum.golang.org`: `<url>/lookup/…`, `<url>/tile/…`). Absent:
    /// through the upstream proxy, at `<remote_url>/sumdb/<name>/…`, as proxy.golang.org serves
    /// sum.golang.org (the upstream credentials go with it, as to the upstream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl GoSettings {
    /// What a Go proxy serves when its definition names no checksum database.
    pub fn proxy_default() -> Self {
        Self { checksum_databases: Some(vec![ChecksumDatabase { name: "sum.golang.org".into(), url: None }]) }
    }
}

/// A checksum database's name: 1 to 253 characters from A-Z, a-z, 0-9, '.', '_' and '-' (a
/// host name, as Go's are; it is a URL path segment and a note key's name).
pub fn check_checksum_database_name(what: &str, name: &str) -> Result<(), InvalidRepository> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && !name.bytes().all(|b| b == b'.');
    if ok {
        Ok(())
    } else {
        Err(InvalidRepository(format!(
            "invalid {what} {:?}: use 1 to 253 characters from A-Z, a-z, 0-9, '.', '_' and '-' (a host name such as sum.golang.org)",
            truncate(name)
        )))
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

/// What is stored in the `settings` column: the format block and the proxy block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apt: Option<AptSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apk: Option<ApkSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub go: Option<GoSettings>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxySettings>,
}

/// The admin API's request body for create and update.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
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
    pub apt: Option<AptSettings>,
    #[serde(default)]
    pub apk: Option<ApkSettings>,
    #[serde(default)]
    pub go: Option<GoSettings>,
    #[serde(default)]
    pub conan: Option<EmptySettings>,
    #[serde(default)]
    pub proxy: Option<ProxySettings>,
    #[serde(default)]
    pub group: Option<GroupSettings>,
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

/// Why a repository definition is refused: the message says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidRepository(pub String);

fn check_token(what: &str, value: &str) -> Result<(), InvalidRepository> {
    let ok = !value.is_empty()
        && value.len() <= 64
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && !value.bytes().all(|b| b == b'.');
    if ok {
        Ok(())
    } else {
        Err(InvalidRepository(format!(
            "invalid {what} {:?}: use 1 to 64 characters from A-Z, a-z, 0-9, '.', '_' and '-'",
            truncate(value)
        )))
    }
}

fn check_list(what: &str, values: &[String]) -> Result<(), InvalidRepository> {
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
        let blocks = [
            ("apt", self.apt.is_some(), Format::Apt),
            ("apk", self.apk.is_some(), Format::Apk),
            ("go", self.go.is_some(), Format::Go),
            ("conan", self.conan.is_some(), Format::Conan),
        ];
        for (key, present, fmt) in blocks {
            if present && fmt != f {
                return Err(InvalidRepository(format!("`{key}` settings do not apply to a {f} repository")));
            }
        }
        let mut settings = StoredSettings::default();
        match f {
            Format::Apt => {
                let mut apt = self.apt.unwrap_or_default();
                check_token("apt.distribution", &apt.distribution)?;
                if !apt.distributions.is_empty() {
                    check_list("apt.distributions", &apt.distributions)?;
                    // A hosted repository's `distribution` is where an upload that names none
                    // goes: one of its distributions, the first unless another is named.
                    if self.repo_type == RepoType::Hosted && !apt.distributions.contains(&apt.distribution) {
                        if apt.distribution != AptSettings::default().distribution {
                            return Err(InvalidRepository(format!(
                                "apt.distribution {:?} (where an upload that names no distribution goes) must be one of apt.distributions: {}",
                                apt.distribution,
                                apt.distributions.join(", ")
                            )));
                        }
                        apt.distribution = apt.distributions[0].clone();
                    }
                }
                // The key itself is checked by the format (it needs the OpenPGP codec).
                if apt.signed_by.is_some() && self.repo_type != RepoType::Proxy {
                    return Err(InvalidRepository(
                        "apt.signed_by applies to proxy repositories (the upstream's key)".into(),
                    ));
                }
                check_list("apt.components", &apt.components)?;
                check_list("apt.architectures", &apt.architectures)?;
                for (key, v) in [("apt.origin", &apt.origin), ("apt.label", &apt.label)] {
                    if let Some(v) = v {
                        if v.is_empty() || v.len() > 200 || v.chars().any(char::is_control) {
                            return Err(InvalidRepository(format!(
                                "{key} must be 1 to 200 printable characters on one line"
                            )));
                        }
                    }
                }
                settings.apt = Some(apt);
            }
            Format::Apk => {
                let apk = self.apk.unwrap_or_default();
                // Each architecture's form and the key are checked by the format.
                check_list("apk.architectures", &apk.architectures)?;
                settings.apk = Some(apk);
            }
            Format::Go => {
                let go = self.go.unwrap_or_default();
                match (self.repo_type, go.checksum_databases) {
                    (RepoType::Proxy, None) => settings.go = Some(GoSettings::proxy_default()),
                    (RepoType::Proxy, Some(dbs)) => {
                        check_checksum_databases(&dbs)?;
                        settings.go = Some(GoSettings { checksum_databases: Some(dbs) });
                    }
                    (_, Some(_)) => {
                        return Err(InvalidRepository(
                            "go.checksum_databases applies to proxy repositories (a hosted or group repository serves a checksum database of its own)".into(),
                        ))
                    }
                    (_, None) => {}
                }
            }
            Format::Conan => {}
        }
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

fn check_url(key: &str, raw: &str) -> Result<(), InvalidRepository> {
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

/// A proxy's checksum databases: valid names, each once; a URL, when given, plain http(s)
/// without credentials, query or fragment (paths are appended to it).
fn check_checksum_databases(dbs: &[ChecksumDatabase]) -> Result<(), InvalidRepository> {
    let mut seen = BTreeSet::new();
    for db in dbs {
        check_checksum_database_name("go.checksum_databases name", &db.name)?;
        if !seen.insert(db.name.as_str()) {
            return Err(InvalidRepository(format!("go.checksum_databases lists {:?} twice", db.name)));
        }
        if let Some(raw) = &db.url {
            let key = format!("the url of checksum database {}", db.name);
            check_url(&key, raw)?;
            if raw.contains(['?', '#']) {
                return Err(InvalidRepository(format!("{key} must not carry a query or fragment")));
            }
        }
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

    #[test]
    fn apt_defaults_apply() -> Result<(), Box<dyn std::error::Error>> {
        let new = spec(serde_json::json!({"name":"debs","format":"apt","type":"hosted"}))?.validate(None)?;
        let apt = new.settings.apt.ok_or("apt settings")?;
        assert_eq!(apt.distribution, "stable");
        assert_eq!(apt.components, vec!["main"]);
        assert_eq!(apt.architectures, vec!["amd64", "all"]);
        assert_eq!(new.write_policy, WritePolicy::AllowOnce);
        assert!(new.anonymous_read);
        Ok(())
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
    fn a_hosted_apt_repository_publishes_several_distributions() -> Result<(), Box<dyn std::error::Error>> {
        let def = |apt: serde_json::Value| -> Result<AptSettings, Box<dyn std::error::Error>> {
            let new =
                spec(serde_json::json!({"name":"debs","format":"apt","type":"hosted","apt":apt}))?.validate(None)?;
            Ok(new.settings.apt.ok_or("apt settings")?)
        };
        // Uploads that name none go to the first, unless another is named.
        let apt = def(serde_json::json!({"distributions":["bookworm","trixie"]}))?;
        assert_eq!((apt.distribution.as_str(), apt.suites()), ("bookworm", vec!["bookworm", "trixie"]));
        let apt = def(serde_json::json!({"distribution":"trixie","distributions":["bookworm","trixie"]}))?;
        assert_eq!(apt.distribution, "trixie");
        // One distribution, as before.
        assert_eq!(def(serde_json::json!({"distribution":"bookworm"}))?.suites(), vec!["bookworm"]);
        let m = invalid(
            serde_json::json!({"name":"d","format":"apt","type":"hosted","apt":{"distribution":"sid","distributions":["bookworm"]}}),
        );
        assert!(m.contains("apt.distribution \"sid\" (where an upload that names no distribution goes) must be one of apt.distributions: bookworm"), "{m}");
        let m =
            invalid(serde_json::json!({"name":"d","format":"apt","type":"hosted","apt":{"distributions":["a","a"]}}));
        assert!(m.contains("apt.distributions lists \"a\" twice"), "{m}");
        Ok(())
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
        let m = invalid(serde_json::json!({"name":"d","format":"apt","type":"hosted","apt":{"components":[]}}));
        assert!(m.contains("apt.components must not be empty"), "{m}");
        let m = invalid(serde_json::json!({"name":"h","format":"go","type":"hosted","group":{"members":[]}}));
        assert!(m.contains("`group` settings do not apply to a hosted repository"), "{m}");
        let m = invalid(serde_json::json!({"name":"x","format":"npm","type":"hosted"}));
        assert!(m.contains("unknown variant `npm`"), "{m}");
    }

    #[test]
    fn go_checksum_databases() -> Result<(), Box<dyn std::error::Error>> {
        let proxy = |go: serde_json::Value| {
            let mut body = serde_json::json!({"name":"p","format":"go","type":"proxy","proxy":{"remote_url":"https://proxy.golang.org/"}});
            if !go.is_null() {
                body["go"] = go;
            }
            body
        };
        // A proxy serves sum.golang.org through its upstream unless told otherwise.
        let new = spec(proxy(serde_json::Value::Null))?.validate(None)?;
        assert_eq!(new.settings.go, Some(GoSettings::proxy_default()));
        let new = spec(proxy(serde_json::json!({})))?.validate(None)?;
        assert_eq!(new.settings.go, Some(GoSettings::proxy_default()));
        let none = spec(proxy(serde_json::json!({"checksum_databases": []})))?.validate(None)?;
        assert_eq!(none.settings.go, Some(GoSettings { checksum_databases: Some(vec![]) }));
        let direct =
            serde_json::json!({"checksum_databases": [{"name":"sum.golang.org","url":"https://sum.golang.org"}]});
        let new = spec(proxy(direct))?.validate(None)?;
        let dbs = new.settings.go.and_then(|g| g.checksum_databases).ok_or("databases")?;
        assert_eq!(dbs[0].url.as_deref(), Some("https://sum.golang.org"));

        for (go, message) in [
            (serde_json::json!({"checksum_databases": [{"name":"a b"}]}), "invalid go.checksum_databases name \"a b\""),
            (serde_json::json!({"checksum_databases": [{"name":"sum+x"}]}), "invalid go.checksum_databases name"),
            (serde_json::json!({"checksum_databases": [{"name":".."}]}), "invalid go.checksum_databases name"),
            (serde_json::json!({"checksum_databases": [{"name":"s"},{"name":"s"}]}), "lists \"s\" twice"),
            (
                serde_json::json!({"checksum_databases": [{"name":"s","url":"ftp://x/"}]}),
                "the url of checksum database s must use http or https",
            ),
            (
                serde_json::json!({"checksum_databases": [{"name":"s","url":"https://u:p@x/"}]}),
                "must not carry credentials",
            ),
            (serde_json::json!({"checksum_databases": [{"name":"s","url":"https://x/?a=b"}]}), "query or fragment"),
        ] {
            let m = invalid(proxy(go));
            assert!(m.contains(message), "{m}");
        }
        let m = invalid(
            serde_json::json!({"name":"x","format":"go","type":"proxy","proxy":{"remote_url":"https://p/"},"go":{"checksum_databases":[{"name":"s","extra":1}]}}),
        );
        assert!(m.contains("unknown field `extra`"), "{m}");
        let m = invalid(serde_json::json!({"name":"h","format":"go","type":"hosted","go":{"checksum_databases":[]}}));
        assert!(m.contains("go.checksum_databases applies to proxy repositories"), "{m}");
        let hosted = spec(serde_json::json!({"name":"h","format":"go","type":"hosted","go":{}}))?.validate(None)?;
        assert_eq!(hosted.settings.go, None);
        Ok(())
    }
}

#[cfg(test)]
mod format_order {
    use super::Format;

    #[test]
    fn index_is_the_place_in_all() {
        for (i, f) in Format::ALL.into_iter().enumerate() {
            assert_eq!(f.index(), i, "{f}");
        }
    }
}
