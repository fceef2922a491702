//! Go groups, merged at publication time: one snapshot per module (published on the module's
//! first request when a member has it, rebuilt after a member publishes it and when a proxy
//! member's upstream list moved on after its metadata TTL). It holds the members' versions merged
//! into `@v/list`, `@latest` over the merge — the latest listed version's `.info` from the
//! member that listed it, or, when no member lists a version, the highest of the members' own
//! `@latest` — and a hidden `.members` file naming the member each version comes from, so that a
//! version's files are served from that member with no walk. A member whose upstream fails
//! (unreachable, timing out, 5xx) is merged without and named in a hidden `.failed` file (the
//! lists' `X-Packyard-Member-Failed`); the refresh rebuilds the module once it answers again.
//! A refusal (401/403) fails the build, as does every member failing: the snapshot before stays.

use std::collections::HashSet;

use super::{proxy_request, Request, KIND};
use packyard_codecs::go::version::{check_info, latest, list};
use packyard_core::groups::{self, members_of, Reader, Sources, MEMBERS_FILE};
use packyard_core::publication::{BuildContext, BuildError};
use packyard_model::repos::{RepoType, Repository};
use packyard_store::db::Db;

pub use packyard_core::groups::SOURCES_FILE;

const JSON: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";

/// A member's file of `module` for `request` (`@v/list`, `@latest`, `@v/<v>.info`): from a
/// hosted or group member's snapshot, from a proxy member's upstream.
async fn member_file(
    reader: &Reader,
    db: &Db,
    member: &Repository,
    request: &Request,
) -> Result<Option<(String, i64)>, BuildError> {
    let path = match request {
        Request::List(_) => "@v/list".to_string(),
        Request::Latest(_) => "@latest".to_string(),
        Request::File { version, ext, .. } => format!("@v/{version}.{ext}"),
    };
    reader.file(db, member, (KIND, request.module(), &path), || proxy_request(member, request)).await
}

/// Builds group `repo`'s snapshot of `module`.
pub async fn merge(
    ctx: &mut BuildContext<'_>,
    reader: &Reader,
    repo: &Repository,
    module: &str,
) -> Result<(), BuildError> {
    let db = ctx.db;
    let members = members_of(db, repo).await?;
    let mut listed: Vec<(String, String)> = Vec::new();
    let mut seen = HashSet::new();
    let mut sources = Sources::new();
    // A member whose upstream fails is merged without (and named); a refusal fails the build.
    let mut failed = groups::Failed::default();
    let mut answered = 0;
    for m in &members {
        let before = failed.len();
        let list = failed.tolerate(member_file(reader, db, m, &Request::List(module.to_string())).await)?;
        if failed.len() > before {
            continue;
        }
        answered += 1;
        let Some((sha, _)) = list else { continue };
        if m.repo_type == RepoType::Proxy {
            sources.insert(m.name.to_string(), sha.clone());
        }
        for line in reader.text(&sha).await?.lines().map(str::trim).filter(|l| !l.is_empty()) {
            // The go command reads a list line's first field, and takes it when it is a semantic
            // version; a line that is not one (an upstream's mistake) is left out.
            let v = line.split_whitespace().next().unwrap_or_default();
            if let Err(why) = packyard_codecs::go::Version::parse(v) {
                ctx.skip(m.name.as_str(), || format!("@v/list line {line:?}: {why}"));
                continue;
            }
            if seen.insert(v.to_string()) {
                listed.push((v.to_string(), m.name.to_string()));
            }
        }
    }
    failed.none_answered(answered)?;
    ctx.put("@v/list", TEXT, list(listed.iter().map(|(v, _)| v.as_str())).as_bytes()).await?;
    let latest_file = match latest(listed.iter().map(|(v, _)| v.as_str())) {
        Some(v) => {
            let owner = listed.iter().find(|(l, _)| l == v).map(|(_, m)| m.as_str()).unwrap_or_default();
            // A nested group publishes no `.info` of its own: its `@latest` is that version's.
            let info = Request::File { module: module.to_string(), version: v.to_string(), ext: "info" };
            let file = match members.iter().find(|m| m.name.as_str() == owner) {
                Some(m) if m.repo_type == RepoType::Group => {
                    member_file(reader, db, m, &Request::Latest(module.to_string())).await?
                }
                Some(m) => member_file(reader, db, m, &info).await?,
                None => None,
            };
            file.map(|(sha, size)| (sha, size, owner.to_string()))
        }
        None => {
            // Nothing listed (only pseudo-versions, say): the highest of the members' @latest.
            let mut candidates = Vec::new();
            for m in &members {
                let latest = failed.tolerate(member_file(reader, db, m, &Request::Latest(module.to_string())).await);
                if let Some((sha, size)) = latest? {
                    let info: serde_json::Value = serde_json::from_str(&reader.text(&sha).await?).unwrap_or_default();
                    if let Some(v) = info["Version"].as_str() {
                        candidates.push((v.to_string(), sha, size, m.name.to_string()));
                    }
                }
            }
            let best = latest(candidates.iter().map(|(v, ..)| v.as_str())).map(str::to_string);
            best.and_then(|b| candidates.into_iter().find(|(v, ..)| *v == b)).map(|(_, sha, size, m)| (sha, size, m))
        }
    };
    if let Some((sha, size, owner)) = latest_file {
        // An upstream's `.info` the go command cannot read is not passed on as `@latest` (the
        // go command then resolves from the list).
        match check_info(&reader.text(&sha).await?) {
            Ok(_) => ctx.reference("@latest", &sha, size, JSON),
            Err(why) => ctx.skip(&owner, || format!("@latest: {why}")),
        }
    }
    ctx.put(MEMBERS_FILE, TEXT, groups::members_map(&listed).as_bytes()).await?;
    ctx.put(SOURCES_FILE, TEXT, groups::render_sources(&sources).as_bytes()).await?;
    ctx.put(groups::FAILED_FILE, TEXT, failed.render().as_bytes()).await?;
    Ok(())
}

/// Whether a member of group `repo` has `module` (a group publishes a module on its first
/// request only when one does): a hosted member has published it, a proxy member's upstream
/// lists it.
pub async fn any_member_has(db: &Db, reader: &Reader, repo: &Repository, module: &str) -> Result<bool, BuildError> {
    let list = Request::List(module.to_string());
    groups::any_member_has(db, repo, KIND, module, |m| {
        let list = &list;
        async move { Ok(reader.fetch(&m, proxy_request(&m, list)).await?.is_some()) }
    })
    .await
}
