//! Go's settings block (`"go": {…}`): the checksum databases a proxy serves.

use std::collections::BTreeSet;

use packyard_core::formats::{FormField, Settings, SettingsForm};
use packyard_model::repos::{check_segment, check_url, Format, FormatSettings, InvalidRepository, RepoType};
use serde::{Deserialize, Serialize};

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

impl FormatSettings for GoSettings {
    const FORMAT: Format = Format::Go;
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

impl Settings for GoSettings {
    /// A proxy's block (with its default database), or none (a hosted or group repository
    /// takes none).
    fn check(self, repo_type: RepoType) -> Result<Option<Self>, InvalidRepository> {
        match (repo_type, self.checksum_databases) {
            (RepoType::Proxy, None) => Ok(Some(Self::proxy_default())),
            (RepoType::Proxy, Some(dbs)) => {
                check_checksum_databases(&dbs)?;
                Ok(Some(Self { checksum_databases: Some(dbs) }))
            }
            (_, Some(_)) => Err(InvalidRepository(
                "go.checksum_databases applies to proxy repositories (a hosted or group repository serves a checksum database of its own)".into(),
            )),
            (_, None) => Ok(None),
        }
    }

    fn schema() -> serde_json::Value {
        serde_json::json!({"type": "object", "additionalProperties": false, "properties": {
            "checksum_databases": {"type": "array", "description": "proxy: the checksum databases served under sumdb/<name>/ through the proxy cache (default [{\"name\":\"sum.golang.org\"}], through the upstream proxy; [] for none)",
                "items": {"type": "object", "additionalProperties": false, "required": ["name"], "properties": {
                    "name": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,253}$"},
                    "url": {"type": "string", "format": "uri", "description": "where the database answers; absent: <remote_url>/sumdb/<name>"}}}}}})
    }

    fn form() -> Option<&'static SettingsForm> {
        Some(&FORM)
    }
}

/// The web UI's fields (a proxy's; a hosted or group repository serves a database of its own).
pub static FORM: SettingsForm = SettingsForm {
    types: &[RepoType::Proxy],
    fields: &[FormField::pairs(
        "checksum_databases",
        "Checksum databases",
        "one per line: a name, and where it answers when not through the upstream proxy (e.g. sum.golang.org, or sum.example.com https://sum.example.com); sum.golang.org when empty, none for none",
        "name",
        "url",
    )],
};

/// A checksum database's name: 1 to 253 characters from A-Z, a-z, 0-9, '.', '_' and '-' (a
/// host name, as Go's are; it is a URL path segment and a note key's name).
pub fn check_checksum_database_name(what: &str, name: &str) -> Result<(), InvalidRepository> {
    check_segment(what, name, 253, " (a host name such as sum.golang.org)")
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
    use packyard_model::repos::NewRepository;

    use crate::tests::{invalid, validated as validate};

    #[test]
    fn checksum_databases() -> Result<(), String> {
        let proxy = |go: serde_json::Value| {
            let mut body = serde_json::json!({"name":"p","format":"go","type":"proxy","proxy":{"remote_url":"https://proxy.golang.org/"}});
            if !go.is_null() {
                body["go"] = go;
            }
            body
        };
        let go = |new: NewRepository| new.settings.format::<GoSettings>();
        // A proxy serves sum.golang.org through its upstream unless told otherwise.
        assert_eq!(go(validate(proxy(serde_json::Value::Null))?), Some(GoSettings::proxy_default()));
        assert_eq!(go(validate(proxy(serde_json::json!({})))?), Some(GoSettings::proxy_default()));
        let none = go(validate(proxy(serde_json::json!({"checksum_databases": []})))?);
        assert_eq!(none, Some(GoSettings { checksum_databases: Some(vec![]) }));
        let direct =
            serde_json::json!({"checksum_databases": [{"name":"sum.golang.org","url":"https://sum.golang.org"}]});
        let dbs = go(validate(proxy(direct))?).and_then(|g| g.checksum_databases).ok_or("databases")?;
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
            (serde_json::json!({"checksum_databases": [{"name":"s","extra":1}]}), "unknown field `extra`"),
        ] {
            let m = invalid(proxy(go));
            assert!(m.contains(message), "{m}");
        }
        let m = invalid(serde_json::json!({"name":"h","format":"go","type":"hosted","go":{"checksum_databases":[]}}));
        assert!(m.contains("go.checksum_databases applies to proxy repositories"), "{m}");
        let hosted = validate(serde_json::json!({"name":"h","format":"go","type":"hosted","go":{}}))?;
        assert_eq!(go(hosted.clone()), None);
        assert!(hosted.settings.blocks.is_empty());
        Ok(())
    }
}
