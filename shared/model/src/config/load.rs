//! Loading the configuration (defaults < file < environment) and `config show`: every effective
//! value with where it came from, secrets and URL passwords masked, as TOML.

use std::path::{Path, PathBuf};

use figment::providers::{Format, Serialized, Toml};
use figment::value::{Dict, Value};
use figment::Figment;

use super::{Config, ConfigError};

/// Keys whose values are never printed.
const SECRET_KEYS: &[&str] = &[
    "security.secret",
    "security.admin_password",
    "security.oidc.client_secret",
    "blobs.s3.secret_access_key",
    "blobs.s3.access_key_id",
];
/// Keys that are URLs and may carry a password.
const URL_KEYS: &[&str] = &["database.url", "cache.redis_url", "events.amqp_url", "proxy.http_proxy"];

/// Where the configuration came from, kept for `config show`.
pub struct Loaded {
    pub config: Config,
    figment: Figment,
}

impl Loaded {
    /// Loads from the process environment and the given (or default) file.
    pub fn load(explicit_file: Option<&Path>) -> Result<Self, ConfigError> {
        let env: Vec<(String, String)> = std::env::vars().collect();
        Self::load_from(explicit_file, &env)
    }

    /// Loads with an explicit environment (testable without touching the process's).
    pub fn load_from(explicit_file: Option<&Path>, env: &[(String, String)]) -> Result<Self, ConfigError> {
        let from_env = env.iter().find(|(k, _)| k == "PACKYARD_CONFIG").map(|(_, v)| PathBuf::from(v));
        let file = explicit_file.map(Path::to_path_buf).or(from_env);
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        match &file {
            Some(path) => {
                if !path.is_file() {
                    return Err(ConfigError(format!("configuration file {} does not exist", path.display())));
                }
                figment = figment.merge(Toml::file(path));
            }
            None => figment = figment.merge(Toml::file("packyard.toml")),
        }
        figment = figment.merge(env_provider(env)?);
        let config: Config = figment.extract().map_err(|e| ConfigError(describe(&e)))?;
        config.validate()?;
        Ok(Self { config, figment })
    }

    /// Every effective value with its source, secrets masked, one `key = value  # source` a line.
    pub fn show(&self) -> String {
        let mut out = String::new();
        let mut masked = self.config.clone();
        for d in &mut masked.security.ldap {
            if d.bind_password.is_some() {
                d.bind_password = Some("********".into());
            }
        }
        let value = match Value::serialize(&masked) {
            Ok(v) => v,
            Err(e) => return format!("# cannot render configuration: {e}\n"),
        };
        let mut flat = Vec::new();
        flatten("", &value, &mut flat);
        for (key, rendered) in flat {
            let shown = if SECRET_KEYS.contains(&key.as_str()) && rendered != "(unset)" {
                "\"********\"".to_string()
            } else if URL_KEYS.contains(&key.as_str()) {
                mask_url_password(&rendered)
            } else {
                rendered
            };
            if key == "security.secret" && shown == "(unset)" {
                // Generated on first start (SQLite only: validation requires it elsewhere).
                let file = self.config.server.data_dir.join("secret");
                if file.is_file() {
                    out.push_str(&format!("{key} = \"********\"  # generated, in {}\n", file.display()));
                } else {
                    out.push_str(&format!("{key} = (unset)  # generated into {} on first start\n", file.display()));
                }
                continue;
            }
            let source = match self.figment.find_metadata(&key) {
                Some(md) if md.name.contains("environment") => {
                    format!("environment {}", env_var_name(&key))
                }
                Some(md) if md.name.contains("TOML") => match &md.source {
                    Some(src) => format!("{} {}", md.name, src),
                    None => md.name.to_string(),
                },
                Some(_) | None => "default".into(),
            };
            // The debug switches are for the tests alone: said so where an operator looks.
            let test_only = if key.starts_with("debug.") { "; test-only, never set in production" } else { "" };
            out.push_str(&format!("{key} = {shown}  # {source}{test_only}\n"));
        }
        out
    }
}

fn env_var_name(key: &str) -> String {
    let mut parts = key.splitn(2, '.');
    let section = parts.next().unwrap_or_default();
    let rest = parts.next().unwrap_or_default().replace('.', "__");
    format!("PACKYARD_{}__{}", section.to_uppercase(), rest.to_uppercase())
}

/// The `PACKYARD_` variables that are not configuration keys: the file's name, and an import
/// source's credentials (`packyard-api import`, kept out of its command line).
const NOT_KEYS: [&str; 3] = ["CONFIG", "IMPORT_USERNAME", "IMPORT_PASSWORD"];

/// `PACKYARD_<SECTION>__<KEY>` → `section.key`. `PACKYARD_CONFIG` names the file instead.
fn env_provider(env: &[(String, String)]) -> Result<Dict_, ConfigError> {
    let mut dict = Dict::new();
    for (name, raw) in env {
        let Some(rest) = name.strip_prefix("PACKYARD_") else {
            continue;
        };
        if NOT_KEYS.contains(&rest) {
            continue;
        }
        let path: Vec<String> = rest.split("__").map(str::to_lowercase).collect();
        if path.iter().any(String::is_empty) || path.len() < 2 {
            return Err(ConfigError(format!(
                "environment variable {name} does not name a key: use PACKYARD_<SECTION>__<KEY>"
            )));
        }
        let value: Value = raw.parse().unwrap_or_else(|_| Value::from(raw.clone()));
        insert_path(&mut dict, &path, value);
    }
    Ok(Dict_(dict))
}

/// An in-memory provider that figment reports as "environment variable".
struct Dict_(Dict);

impl figment::Provider for Dict_ {
    fn metadata(&self) -> figment::Metadata {
        figment::Metadata::named("environment variable")
    }
    fn data(&self) -> Result<figment::value::Map<figment::Profile, Dict>, figment::Error> {
        let mut map = figment::value::Map::new();
        map.insert(figment::Profile::Default, self.0.clone());
        Ok(map)
    }
}

fn insert_path(dict: &mut Dict, path: &[String], value: Value) {
    match path {
        [] => {}
        [last] => {
            dict.insert(last.clone(), value);
        }
        [first, rest @ ..] => {
            let entry = dict.entry(first.clone()).or_insert_with(|| Value::from(Dict::new()));
            if let Value::Dict(_, inner) = entry {
                insert_path(inner, rest, value);
            } else {
                let mut inner = Dict::new();
                insert_path(&mut inner, rest, value);
                *entry = Value::from(inner);
            }
        }
    }
}

fn flatten(prefix: &str, value: &Value, out: &mut Vec<(String, String)>) {
    match value {
        Value::Dict(_, dict) => {
            for (k, v) in dict {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, out);
            }
        }
        Value::Empty(..) => out.push((prefix.to_string(), "(unset)".into())),
        other => out.push((prefix.to_string(), toml_value(other))),
    }
}

/// A value as TOML writes it: a string quoted and escaped, an array `[a, b]`, a table inline.
fn toml_value(value: &Value) -> String {
    match value {
        Value::String(_, s) => toml_string(s),
        Value::Array(_, items) => {
            let items: Vec<String> = items.iter().filter(|v| !matches!(v, Value::Empty(..))).map(toml_value).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Dict(_, dict) => {
            let pairs: Vec<String> = dict
                .iter()
                .filter(|(_, v)| !matches!(v, Value::Empty(..)))
                .map(|(k, v)| format!("{} = {}", toml_key(k), toml_value(v)))
                .collect();
            if pairs.is_empty() {
                "{}".into()
            } else {
                format!("{{ {} }}", pairs.join(", "))
            }
        }
        Value::Empty(..) => "(unset)".into(),
        other => match other.to_num() {
            Some(n) => match n.to_u128() {
                Some(u) => u.to_string(),
                None => n
                    .to_i128()
                    .map_or_else(|| n.to_f64().map_or_else(String::new, |f| f.to_string()), |i| i.to_string()),
            },
            None => other.to_bool().map_or_else(String::new, |b| b.to_string()),
        },
    }
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A key of an inline table: bare where TOML allows it, quoted otherwise.
fn toml_key(k: &str) -> String {
    if !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        k.to_string()
    } else {
        toml_string(k)
    }
}

/// Replaces the password of a URL-shaped (quoted) value with `****`.
fn mask_url_password(rendered: &str) -> String {
    let inner = rendered.trim_matches('"');
    if !inner.contains("://") && inner.contains('@') {
        // `user:password@host:port` without a scheme (a proxy may be written so).
        return match url::Url::parse(&format!("http://{inner}")) {
            Ok(mut u) if u.password().is_some() => {
                let _ = u.set_password(Some("****"));
                format!("\"{}\"", u.as_str().trim_start_matches("http://"))
            }
            _ => "\"********\"".to_string(),
        };
    }
    match url::Url::parse(inner) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("****"));
            format!("\"{u}\"")
        }
        _ => rendered.to_string(),
    }
}

/// Turns a figment error into one line per problem that names the key in `section.key` form.
fn describe(err: &figment::Error) -> String {
    err.clone()
        .into_iter()
        .map(|e| {
            let key = e.path.join(".");
            let origin = e
                .metadata
                .as_ref()
                .map(|md| match &md.source {
                    Some(src) => format!(" (from {} {})", md.name, src),
                    None if md.name.contains("environment") => {
                        format!(" (from environment variable {})", env_var_name(&key))
                    }
                    None => format!(" (from {})", md.name),
                })
                .unwrap_or_default();
            let kind = match &e.kind {
                figment::error::Kind::UnknownField(field, _) => {
                    let full = if key.is_empty() {
                        field.clone()
                    } else if key == *field || key.ends_with(&format!(".{field}")) {
                        key.clone()
                    } else {
                        format!("{key}.{field}")
                    };
                    return format!("unknown key `{full}`{origin}");
                }
                other => other.to_string(),
            };
            if key.is_empty() {
                format!("{kind}{origin}")
            } else {
                format!("bad value for key `{key}`: {kind}{origin}")
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}
