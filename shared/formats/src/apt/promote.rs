//! What a promotion `with_dependencies` adds (`FormatSpec::dependencies`): the packages the
//! selected ones need (`Pre-Depends`, `Depends`) that the target cannot satisfy, taken from the
//! source — for each relation the first alternative the source satisfies, its newest version
//! that does, of the dependent's architecture or `all` — and followed through what those need.
//! A relation neither satisfies is left as it is (the target's users see it unmet, as they
//! would have). Virtual packages (`Provides`) are not followed.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap, VecDeque};

use packyard_codecs::apt::version::compare;
use packyard_core::hosted::UploadError;
use packyard_core::services::Services;
use packyard_model::repos::Repository;
use packyard_store::db::Db;

use super::rows::{self, AptPackage};

/// One alternative of a relation: a name and an optional `(operator, version)`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Alternative {
    name: String,
    bound: Option<(String, String)>,
}

impl Alternative {
    fn admits(&self, version: &str) -> bool {
        let Some((op, want)) = &self.bound else { return true };
        let c = compare(version, want);
        match op.as_str() {
            "<<" => c == Ordering::Less,
            "<=" | "<" => c != Ordering::Greater,
            "=" => c == Ordering::Equal,
            ">=" | ">" => c != Ordering::Less,
            ">>" => c == Ordering::Greater,
            _ => false,
        }
    }
}

/// The relations of `field` in a control text: each a list of alternatives.
fn relations(control: &str, field: &str) -> Vec<Vec<Alternative>> {
    let Some(value) = super::catalogue::control_field(control, field) else { return Vec::new() };
    super::catalogue::relations(&value)
        .iter()
        .map(|group| group.split('|').filter_map(|alt| alternative(alt.trim())).collect::<Vec<_>>())
        .filter(|g| !g.is_empty())
        .collect()
}

fn alternative(text: &str) -> Option<Alternative> {
    let end = text.find([' ', '(', '[', '<', ':']).unwrap_or(text.len());
    let name = text[..end].trim();
    if name.is_empty() {
        return None;
    }
    let bound = text.find('(').and_then(|open| {
        let inner = text[open + 1..].split(')').next()?.trim();
        let op_end = inner.find(|c: char| !matches!(c, '<' | '>' | '=')).unwrap_or(inner.len());
        let (op, version) = (inner[..op_end].trim(), inner[op_end..].trim());
        (!op.is_empty() && !version.is_empty()).then(|| (op.to_string(), version.to_string()))
    });
    Some(Alternative { name: name.to_string(), bound })
}

/// The newest of `candidates` that `alt` admits, of one of `arches` (the dependent's
/// architecture and `all`; for an `all` package, what the target publishes).
fn best<'p>(candidates: &'p [AptPackage], alt: &Alternative, arches: &[String]) -> Option<&'p AptPackage> {
    candidates
        .iter()
        .filter(|p| arches.contains(&p.architecture) && alt.admits(&p.version))
        .max_by(|a, b| compare(&a.version, &b.version))
}

/// The architectures that satisfy a dependency of a package of `arch` in `to`.
fn arches_for(arch: &str, to: &Repository) -> Vec<String> {
    let mut out = vec!["all".to_string()];
    if arch == "all" {
        out.extend(
            <super::settings::AptSettings as packyard_model::repos::FormatSettings>::of(to)
                .architectures
                .into_iter()
                .filter(|a| a != "all"),
        );
    } else {
        out.push(arch.to_string());
    }
    out
}

/// The packages named `name` in a repository, each name read once per request.
struct Names<'d> {
    db: &'d Db,
    read: HashMap<(i64, String), Vec<AptPackage>>,
}

impl Names<'_> {
    async fn of(&mut self, repo: i64, name: &str) -> Result<&[AptPackage], UploadError> {
        let key = (repo, name.to_string());
        if !self.read.contains_key(&key) {
            let found = rows::by_name(self.db, repo, name).await?;
            self.read.insert(key.clone(), found);
        }
        Ok(self.read.get(&key).map(Vec::as_slice).unwrap_or_default())
    }
}

/// The keys (pool paths) of `from`'s packages that the packages keyed `keys` need and `to`
/// lacks, followed transitively.
pub async fn dependencies(
    services: &Services,
    (from, to): (&Repository, &Repository),
    keys: &[String],
) -> Result<Vec<String>, UploadError> {
    let db = &services.db;
    let mut names = Names { db, read: HashMap::new() };
    let mut queue: VecDeque<AptPackage> = VecDeque::new();
    // What the target will hold of each name once the batch is in: what it has, and what is
    // chosen.
    let mut chosen: HashMap<String, Vec<AptPackage>> = HashMap::new();
    for key in keys {
        if let Some(p) = rows::by_pool_path(db, db.pool(), from.id, key).await? {
            chosen.entry(p.name.clone()).or_default().push(p.clone());
            queue.push_back(p);
        }
    }
    let mut added = Vec::new();
    let mut seen: BTreeSet<String> = keys.iter().cloned().collect();
    while let Some(p) = queue.pop_front() {
        let arches = arches_for(&p.architecture, to);
        for field in ["Pre-Depends", "Depends"] {
            'relation: for group in relations(&p.control, field) {
                for alt in &group {
                    let mine = chosen.get(&alt.name).map(Vec::as_slice).unwrap_or_default();
                    if best(mine, alt, &arches).is_some()
                        || best(names.of(to.id, &alt.name).await?, alt, &arches).is_some()
                    {
                        continue 'relation;
                    }
                }
                for alt in &group {
                    let Some(found) = best(names.of(from.id, &alt.name).await?, alt, &arches).cloned() else {
                        continue;
                    };
                    if seen.insert(found.pool_path.clone()) {
                        added.push(found.pool_path.clone());
                        chosen.entry(found.name.clone()).or_default().push(found.clone());
                        queue.push_back(found);
                    }
                    break;
                }
            }
        }
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relations_and_bounds() {
        let control = "Package: app\nVersion: 1\nArchitecture: amd64\nDepends: libfoo (>= 1.2), libbar | libbaz (<< 2),\n python3:any, libc6 (>= 2.36)\nPre-Depends: dpkg (>= 1.19)\nDescription: x\n";
        let deps = relations(control, "Depends");
        let names: Vec<Vec<&str>> = deps.iter().map(|g| g.iter().map(|a| a.name.as_str()).collect()).collect();
        assert_eq!(names, vec![vec!["libfoo"], vec!["libbar", "libbaz"], vec!["python3"], vec!["libc6"]]);
        assert_eq!(deps[0][0].bound, Some((">=".into(), "1.2".into())));
        assert!(deps[0][0].admits("1.2") && deps[0][0].admits("1.10") && !deps[0][0].admits("1.1"));
        assert!(deps[1][1].admits("1.9") && !deps[1][1].admits("2"));
        assert_eq!(relations(control, "Pre-Depends")[0][0].name, "dpkg");
        assert!(relations(control, "Recommends").is_empty());
    }
}
