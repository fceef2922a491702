//! The Go vulnerability database a Go repository serves under `vulndb/` (`GOVULNDB`), built
//! from the imported OSV data of the `Go` ecosystem, so `govulncheck` checks a build offline.
//! Both layouts clients read: the one of `govulncheck` releases before mid-2023 (Debian's:
//! `index.json` — each module's last change —, `<module>.json` — its advisories —,
//! `ID/index.json`, `ID/<id>.json`, `aliases.json`) and the current one (`index/db.json`,
//! `index/modules.json`, `index/vulns.json`, `ID/<id>.json`), each also as `.json.gz`.

use std::collections::BTreeMap;
use std::io::Write as _;

use packyard_store::db::advisories::AdvisoryRow;
use serde_json::{json, Value};

/// A file of the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VulnPath {
    /// `index.json`: module → the last change of its advisories.
    LegacyIndex,
    /// `<module>.json` (the module path case-encoded as in the GOPROXY protocol).
    LegacyModule(String),
    /// `aliases.json`: alias → ids.
    Aliases,
    /// `ID/index.json`: every id.
    Ids,
    /// `ID/<id>.json`: one record.
    Id(String),
    /// `index/db.json`: the database's last change.
    Db,
    /// `index/modules.json`: each module's advisories.
    Modules,
    /// `index/vulns.json`: each advisory's id, change and aliases.
    Vulns,
}

/// A request below `vulndb/`: the file, and whether it is asked gzipped.
pub fn parse(rest: &str) -> Option<(VulnPath, bool)> {
    let (stem, gz) = match rest.strip_suffix(".json.gz") {
        Some(s) => (s, true),
        None => (rest.strip_suffix(".json")?, false),
    };
    let path = match stem {
        "index" => VulnPath::LegacyIndex,
        "aliases" => VulnPath::Aliases,
        "ID/index" => VulnPath::Ids,
        "index/db" => VulnPath::Db,
        "index/modules" => VulnPath::Modules,
        "index/vulns" => VulnPath::Vulns,
        _ => match stem.strip_prefix("ID/") {
            Some(id) if !id.is_empty() && !id.contains('/') => VulnPath::Id(id.to_string()),
            Some(_) => return None,
            None => {
                let module = packyard_codecs::go::unescape(stem).ok()?;
                packyard_codecs::go::check_module_path(&module).ok()?;
                VulnPath::LegacyModule(module)
            }
        },
    };
    Some((path, gz))
}

/// One advisory as the database keeps it: its row, its record, the modules it names.
pub struct Entry {
    pub row: AdvisoryRow,
    pub record: Value,
    pub modules: Vec<String>,
}

impl Entry {
    pub fn new(row: AdvisoryRow, modules: Vec<String>) -> Self {
        let record = serde_json::from_str(&row.record).unwrap_or(Value::Null);
        Self { row, record, modules }
    }

    /// The version `module`'s last range fixes it in, when one does (without the `v`, as OSV
    /// writes it).
    fn fixed(&self, module: &str) -> Option<String> {
        let affected = self.record["affected"].as_array()?;
        let events = affected
            .iter()
            .filter(|a| a["package"]["name"].as_str() == Some(module))
            .flat_map(|a| a["ranges"].as_array().into_iter().flatten())
            .flat_map(|r| r["events"].as_array().into_iter().flatten());
        events.filter_map(|e| e["fixed"].as_str()).next_back().map(str::to_string)
    }
}

/// The JSON of `path`, or `None` when the database has no such file.
pub fn file(entries: &[Entry], path: &VulnPath) -> Option<Value> {
    let latest = |it: &mut dyn Iterator<Item = &Entry>| it.map(|e| e.row.modified.clone()).max();
    Some(match path {
        VulnPath::LegacyIndex => {
            let mut index: BTreeMap<&str, String> = BTreeMap::new();
            for e in entries {
                for m in &e.modules {
                    let at = index.entry(m).or_default();
                    if e.row.modified > *at {
                        at.clone_from(&e.row.modified);
                    }
                }
            }
            json!(index)
        }
        VulnPath::LegacyModule(module) => {
            let found: Vec<&Value> = entries.iter().filter(|e| e.modules.contains(module)).map(|e| &e.record).collect();
            if found.is_empty() {
                return None;
            }
            json!(found)
        }
        VulnPath::Aliases => {
            let mut aliases: BTreeMap<String, Vec<&str>> = BTreeMap::new();
            for e in entries {
                for a in e.record["aliases"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                    aliases.entry(a.to_string()).or_default().push(&e.row.id);
                }
            }
            json!(aliases)
        }
        VulnPath::Ids => json!(entries.iter().map(|e| e.row.id.as_str()).collect::<Vec<_>>()),
        VulnPath::Id(id) => entries.iter().find(|e| e.row.id == *id)?.record.clone(),
        VulnPath::Db => {
            json!({"modified": latest(&mut entries.iter()).unwrap_or_else(|| "1970-01-01T00:00:00Z".into())})
        }
        VulnPath::Modules => {
            let mut modules: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
            for e in entries {
                for m in &e.modules {
                    let mut v = json!({"id": e.row.id, "modified": e.row.modified});
                    if let Some(fixed) = e.fixed(m) {
                        v["fixed"] = json!(fixed);
                    }
                    modules.entry(m).or_default().push(v);
                }
            }
            json!(modules.into_iter().map(|(path, vulns)| json!({"path": path, "vulns": vulns})).collect::<Vec<_>>())
        }
        VulnPath::Vulns => json!(entries
            .iter()
            .map(|e| json!({"id": e.row.id, "modified": e.row.modified, "aliases": e.record["aliases"]}))
            .collect::<Vec<_>>()),
    })
}

/// `value`'s bytes, gzipped when asked.
pub fn bytes(value: &Value, gz: bool) -> std::io::Result<Vec<u8>> {
    let text = serde_json::to_vec(value)?;
    if !gz {
        return Ok(text);
    }
    let mut out = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    out.write_all(&text)?;
    out.finish()
}
