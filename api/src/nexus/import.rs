//! `packyard-api import nexus --url URL [--repository NAME]`: moving in from a Nexus Repository
//! Manager 3 through its REST API. Its repositories (`/v1/repositorySettings`) are read by the
//! same translation as `POST /v1/repositories/<format>/<type>` (hosted and proxy ones first,
//! groups after their members), its roles (`/v1/security/roles`) through the privilege mapping
//! of `GET /v1/security/privileges`, its users (`/v1/security/users`) — local ones created
//! without a usable password, which Nexus never exports, so each is named for a reset —, then
//! each hosted repository's packages are copied by its format's importer from the
//! repository's own client URL (`<url>/repository/<name>/`): the same paths, every byte checked
//! against the index that lists it, resumable and incremental through the import ledger. What
//! cannot be mapped is reported line by line and left out; nothing half-made is kept.

use std::collections::{BTreeMap, BTreeSet};

use packyard_core::admin::{roles, users};
use packyard_core::hosted::Actor;
use packyard_core::import::{Fetcher, ImportArgs, Location, Options, Summary};
use packyard_core::services::Services;
use packyard_model::repos::RepoType;
use serde_json::Value;

use super::repositories::{create_read, kind, read};
use super::security::{merged, privilege_of};

/// Packyard's built-in roles for Nexus's.
const BUILTIN_ROLES: [(&str, &str); 2] = [("nx-admin", "admin"), ("nx-anonymous", "anonymous")];

/// What a run did.
#[derive(Debug, Default)]
pub struct Report {
    pub repositories_created: usize,
    pub roles_created: usize,
    pub users_created: usize,
    /// Things left out, with why (not failures: the report names each).
    pub left_out: usize,
    /// The copies of the hosted repositories' packages.
    pub assets: Summary,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} repositories, {} roles and {} users created, {} left out (above); packages: {}",
            self.repositories_created, self.roles_created, self.users_created, self.left_out, self.assets
        )
    }
}

/// The run's output lines.
struct Out<'a> {
    out: &'a mut (dyn std::io::Write + Send),
    dry_run: bool,
}

impl Out<'_> {
    fn line(&mut self, line: impl std::fmt::Display) {
        let _ = writeln!(self.out, "{line}");
    }
}

/// A JSON answer of Nexus's REST API below `url`.
async fn get(fetcher: &Fetcher, url: &Location, path: &str) -> anyhow::Result<Option<Value>> {
    let at = url.join(path)?;
    let Some(body) = fetcher.read(&at).await? else { return Ok(None) };
    Ok(Some(serde_json::from_slice(&body).map_err(|e| anyhow::anyhow!("{at}: not Nexus's JSON: {e}"))?))
}

/// Runs the import from the Nexus at `url` (`--repository`: only that repository, and no users
/// or roles).
pub async fn run(
    services: &Services,
    fetcher: &Fetcher,
    url: &Location,
    only: Option<&str>,
    options: &Options,
    out: &mut (dyn std::io::Write + Send),
) -> anyhow::Result<Report> {
    let url = url.as_dir();
    let mut out = Out { out, dry_run: options.dry_run };
    let mut report = Report::default();
    let actor = Actor::system("import");
    let settings = get(fetcher, &url, "service/rest/v1/repositorySettings").await?.ok_or_else(|| {
        anyhow::anyhow!(
            "{url}service/rest/v1/repositorySettings: not found: --url is a Nexus Repository Manager 3's root URL (3.20 or later)"
        )
    })?;
    let mut repositories: Vec<&Value> = settings.as_array().into_iter().flatten().collect();
    if let Some(name) = only {
        repositories.retain(|r| r["name"].as_str() == Some(name));
        anyhow::ensure!(!repositories.is_empty(), "--repository {name}: the Nexus at {url} has no such repository");
    }
    let order = |r: &&Value| match r["type"].as_str() {
        Some("hosted") => 0,
        Some("proxy") => 1,
        _ => 2,
    };
    repositories.sort_by_key(|r| (order(r), r["name"].as_str().map(str::to_string)));
    let repositories = members_first(repositories);

    // Repositories.
    let site = services.config.server.public_url.clone().unwrap_or_default();
    let mut present: BTreeSet<String> = BTreeSet::new();
    let mut hosted: Vec<String> = Vec::new();
    for r in repositories {
        let name = r["name"].as_str().unwrap_or_default().to_string();
        let (format, repo_type) = (r["format"].as_str().unwrap_or_default(), r["type"].as_str().unwrap_or_default());
        let what = format!("repository {name} ({format} {repo_type})");
        let Ok((spec, kind_of)) = kind(format, repo_type) else {
            out.line(format!(
                "{what}: left out: Packyard serves {} repositories",
                packyard_model::repos::Format::listed("and")
            ));
            report.left_out += 1;
            continue;
        };
        if let Some(existing) = services.security.repository(&name).await? {
            if existing.format == spec.format() && existing.repo_type == kind_of {
                out.line(format!("{what}: exists, kept as it is"));
                present.insert(name.clone());
                if kind_of == RepoType::Hosted {
                    hosted.push(name);
                }
            } else {
                out.line(format!(
                    "{what}: left out: Packyard has a {} {} repository of that name",
                    existing.format,
                    existing.repo_type.as_str()
                ));
                report.left_out += 1;
            }
            continue;
        }
        let mut body = r.as_object().cloned().unwrap_or_default();
        if kind_of == RepoType::Group {
            let members: Vec<String> = r["group"]["memberNames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect();
            let mut kept = Vec::new();
            let mut dropped = Vec::new();
            for m in members {
                // Created or kept in this run, or a repository Packyard has of the format.
                let there = present.contains(&m)
                    || services.security.repository(&m).await?.is_some_and(|r| r.format == spec.format());
                if there {
                    kept.push(m);
                } else {
                    dropped.push(m);
                }
            }
            if !dropped.is_empty() {
                out.line(format!("{what}: members {} are not in Packyard: left out of the group", dropped.join(", ")));
                report.left_out += dropped.len();
            }
            body.insert("group".into(), serde_json::json!({"memberNames": kept}));
        }
        for note in ignored(&body) {
            out.line(format!("{what}: {note}"));
        }
        // `repositorySettings` names a proxy's routing rule `routingRuleName`: refused as
        // `routingRule` is.
        if let Some(rule) = r["routingRuleName"].as_str().filter(|s| !s.is_empty()) {
            body.insert("routingRule".into(), Value::String(rule.to_string()));
        }
        // Cleanup policies Packyard does not have are left out (the repository is not).
        if let Some(names) = r["cleanup"]["policyNames"].as_array() {
            let mut kept = Vec::new();
            for name in names.iter().filter_map(Value::as_str) {
                if packyard_core::admin::cleanup::get(services, name).await.is_ok_and(|p| p.format == format) {
                    kept.push(name.to_string());
                } else {
                    out.line(format!(
                        "{what}: cleanup policy {name}: Packyard has no {format} policy of that name: left out \
                         (create it, then list it in the repository's cleanup.policyNames)"
                    ));
                    report.left_out += 1;
                }
            }
            body.insert("cleanup".into(), serde_json::json!({"policyNames": kept}));
        }
        // Nexus shows no stored secret: an upstream's password, an APT signing key.
        let upstream_user = r["httpClient"]["authentication"]["username"].as_str().map(str::to_string);
        let read = match read(spec, kind_of, &body) {
            Ok(read) => read,
            Err(e) => {
                out.line(format!("{what}: left out: {}", e.0.message));
                report.left_out += 1;
                continue;
            }
        };
        let new_key = read.signing_key.is_none() && spec.signing_keys().is_some() && kind_of != RepoType::Proxy;
        if out.dry_run {
            out.line(format!("{what}: would be created"));
        } else {
            if let Err(e) = create_read(services, actor, &site, (spec, kind_of), read).await {
                out.line(format!("{what}: left out: {}", e.0.message));
                report.left_out += 1;
                continue;
            }
            out.line(format!("{what}: created"));
            report.repositories_created += 1;
        }
        if let Some(user) = upstream_user {
            out.line(format!(
                "{what}: Nexus does not export the upstream's password (user {user}): set proxy.password \
                 (PATCH /api/v1/repositories/{name})"
            ));
        }
        if new_key {
            out.line(format!(
                "{what}: signed with a key of its own (Nexus does not export its private key): clients trust \
                 the new one (the repository's set-up page shows it)"
            ));
        }
        present.insert(name.clone());
        if kind_of == RepoType::Hosted {
            hosted.push(name);
        }
    }

    if only.is_none() {
        // Without them (a user who may not read security), the packages still come.
        if let Err(e) = roles_and_users(services, fetcher, &url, actor, &mut out, &mut report).await {
            out.line(format!("roles and users: left out: {e}"));
            report.left_out += 1;
        }
    }

    // The hosted repositories' packages, by their formats' importers.
    for name in hosted {
        let Some(repo) = services.security.repository(&name).await? else {
            out.line(format!("packages of {name}: copied once the repository is created (a dry run creates nothing)"));
            continue;
        };
        let spec = packyard_formats::registry().get(repo.format);
        let from = url.join(&format!("repository/{name}/"))?.as_dir();
        let source = from.name();
        let args = ImportArgs { from, key: None, only: Vec::new() };
        let Some(job) = spec.import(args) else {
            out.line(format!("packages of {name}: left out: Packyard has no importer of {} yet", repo.format));
            report.left_out += 1;
            continue;
        };
        let job = match job {
            Ok(job) => job,
            Err(e) => {
                out.line(format!("packages of {name}: left out: {e}"));
                report.left_out += 1;
                continue;
            }
        };
        out.line(format!("packages of {name}: from {source}"));
        // Its own credentials: a format may trade them for a token of this repository's.
        let fetcher = fetcher.detached();
        match job.run(services, (&fetcher, &source), &repo, options, out.out).await {
            Ok(s) => {
                out.line(format!("packages of {name}: {s}"));
                let a = &mut report.assets;
                a.planned += s.planned;
                a.skipped += s.skipped;
                a.copied += s.copied;
                a.bytes += s.bytes;
                a.present += s.present;
                a.failed.extend(s.failed);
                a.elapsed += s.elapsed;
            }
            Err(e) => {
                out.line(format!("packages of {name}: failed: {e}"));
                report.assets.failed.push((name.clone(), e.to_string()));
            }
        }
    }
    Ok(report)
}

/// Groups after the groups they hold (a group of groups), the rest in the order given; a
/// cycle keeps its order (its members are then left out, as Packyard refuses the cycle anyway).
fn members_first(mut todo: Vec<&Value>) -> Vec<&Value> {
    let mut out: Vec<&Value> = Vec::new();
    while !todo.is_empty() {
        let pending: BTreeSet<&str> = todo.iter().filter_map(|r| r["name"].as_str()).collect();
        let ready = todo.iter().position(|r| {
            let members = r["group"]["memberNames"].as_array().into_iter().flatten().filter_map(Value::as_str);
            members.filter(|m| Some(*m) != r["name"].as_str()).all(|m| !pending.contains(m))
        });
        out.push(todo.remove(ready.unwrap_or(0)));
    }
    out
}

/// What a repository's definition sets that Packyard has no counterpart for and ignores (as
/// docs/nexus-api.md's table says), when it differs from what Packyard does anyway.
fn ignored(body: &serde_json::Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    let at = |path: &[&str]| {
        let (first, rest) = path.split_first()?;
        rest.iter().try_fold(body.get(*first)?, |v, k| v.get(*k))
    };
    if at(&["storage", "strictContentTypeValidation"]).and_then(Value::as_bool) == Some(false) {
        out.push(
            "storage.strictContentTypeValidation false ignored: every upload is checked as a package of its format"
                .into(),
        );
    }
    if at(&["component", "proprietaryComponents"]).and_then(Value::as_bool) == Some(true) {
        out.push("component.proprietaryComponents ignored (a Sonatype Firewall setting)".into());
    }
    if let Some(age) = at(&["proxy", "contentMaxAge"]).and_then(Value::as_i64).filter(|a| *a != -1) {
        out.push(format!("proxy.contentMaxAge {age} ignored: a package file at a path never changes, so it is kept"));
    }
    if at(&["httpClient", "autoBlock"]).and_then(Value::as_bool) == Some(true) {
        out.push("httpClient.autoBlock ignored: an upstream that fails is asked again on the next miss (its cached files are served meanwhile)".into());
    }
    if let Some(c) = at(&["httpClient", "connection"]).and_then(Value::as_object) {
        let set: Vec<&str> = c.iter().filter(|(_, v)| !v.is_null()).map(|(k, _)| k.as_str()).collect();
        if !set.is_empty() {
            out.push(format!(
                "httpClient.connection ({}) ignored: timeouts, retries and the user agent are the instance's (proxy.*)",
                set.join(", ")
            ));
        }
    }
    if at(&["replication"]).is_some_and(|v| !v.is_null()) {
        out.push("replication ignored".into());
    }
    out
}

/// Nexus's roles (flattened: Packyard's roles hold privileges, not other roles) and users.
async fn roles_and_users(
    services: &Services,
    fetcher: &Fetcher,
    url: &Location,
    actor: Actor<'_>,
    out: &mut Out<'_>,
    report: &mut Report,
) -> anyhow::Result<()> {
    let listed = get(fetcher, url, "service/rest/v1/security/roles").await?.unwrap_or_default();
    let all: BTreeMap<String, &Value> = listed
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["id"].as_str().map(|id| (id.to_string(), r)))
        .collect();
    let mut known: BTreeMap<String, String> =
        BUILTIN_ROLES.iter().map(|(n, p)| (n.to_string(), p.to_string())).collect();
    for (id, role) in &all {
        if known.contains_key(id) {
            continue;
        }
        let what = format!("role {id}");
        if role["source"].as_str().is_some_and(|s| s != "default") {
            out.line(format!("{what}: left out: a role of the {} source comes from the directory", role["source"]));
            report.left_out += 1;
            continue;
        }
        if roles::get(services, id).await.is_ok() {
            out.line(format!("{what}: exists, kept as it is"));
            known.insert(id.clone(), id.clone());
            continue;
        }
        // Its privileges and those of the roles it contains, however deep.
        let mut names = BTreeSet::new();
        let (mut todo, mut seen) = (vec![id.clone()], BTreeSet::new());
        while let Some(next) = todo.pop() {
            if !seen.insert(next.clone()) {
                continue;
            }
            let Some(r) = all.get(&next) else { continue };
            names
                .extend(r["privileges"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string));
            todo.extend(r["roles"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string));
        }
        let mut privileges = Vec::new();
        for name in names {
            match privilege_of(&name) {
                Ok(p) => privileges.push(p),
                Err(e) => {
                    out.line(format!("{what}: privilege left out: {e}"));
                    report.left_out += 1;
                }
            }
        }
        let description = role["description"].as_str().unwrap_or_default().to_string();
        let body = roles::RoleBody { name: Some(id.clone()), description, privileges: merged(privileges) };
        if out.dry_run {
            out.line(format!("{what}: would be created"));
            known.insert(id.clone(), id.clone());
            continue;
        }
        match roles::create(services, actor, body).await {
            Ok(_) => {
                out.line(format!("{what}: created"));
                report.roles_created += 1;
                known.insert(id.clone(), id.clone());
            }
            Err(e) => {
                out.line(format!("{what}: left out: {e}"));
                report.left_out += 1;
            }
        }
    }

    let listed = get(fetcher, url, "service/rest/v1/security/users").await?.unwrap_or_default();
    for user in listed.as_array().into_iter().flatten() {
        let id = user["userId"].as_str().unwrap_or_default().to_string();
        let what = format!("user {id}");
        if id == "anonymous" {
            continue;
        }
        let nexus_roles: Vec<String> =
            user["roles"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect();
        let source = user["source"].as_str().unwrap_or("default");
        if source != "default" {
            out.line(format!(
                "{what}: left out: a user of the {source} source signs in through the directory Packyard is \
                 configured with (security.ldap, security.oidc); Nexus gave them the roles {}",
                nexus_roles.join(", ")
            ));
            report.left_out += 1;
            continue;
        }
        if users::get(services, &id).await.is_ok() {
            out.line(format!("{what}: exists, kept as it is"));
            continue;
        }
        let mut granted = Vec::new();
        for r in &nexus_roles {
            match known.get(r) {
                Some(role) => granted.push(role.clone()),
                None => {
                    out.line(format!("{what}: role {r} left out (not imported)"));
                    report.left_out += 1;
                }
            }
        }
        if user["status"].as_str().is_some_and(|s| !s.eq_ignore_ascii_case("active")) {
            out.line(format!("{what}: {} in Nexus: created without roles", user["status"].as_str().unwrap_or("")));
            granted.clear();
        }
        if out.dry_run {
            out.line(format!("{what}: would be created, roles {}", granted.join(", ")));
            continue;
        }
        let name = format!(
            "{} {}",
            user["firstName"].as_str().unwrap_or_default().trim(),
            user["lastName"].as_str().unwrap_or_default().trim()
        );
        let new = users::NewUser {
            username: id.clone(),
            // Nobody knows it: the user's password is set by a reset.
            password: unusable_password(),
            roles: granted.clone(),
            email: user["emailAddress"].as_str().filter(|e| !e.is_empty()).map(str::to_string),
            display_name: Some(name.trim().to_string()).filter(|n| !n.is_empty()),
        };
        match users::create(services, actor, new).await {
            Ok(_) => {
                out.line(format!(
                    "{what}: created with roles {} and no usable password (Nexus does not export passwords): \
                     `packyard-api admin reset-password {id}` gives one",
                    granted.join(", ")
                ));
                report.users_created += 1;
            }
            Err(e) => {
                out.line(format!("{what}: left out: {e}"));
                report.left_out += 1;
            }
        }
    }
    Ok(())
}

/// A long random password nobody is told.
fn unusable_password() -> String {
    use rand::Rng as _;
    let mut rng = rand::thread_rng();
    (0..48).map(|_| char::from(rng.sample(rand::distributions::Alphanumeric))).collect()
}
