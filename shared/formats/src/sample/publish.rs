//! The sample format's index: a hosted repository's built from its rows in keyset pages, a
//! group's merged from its members' (a hosted or group member's published index, a proxy
//! member's upstream one) at publication time, with a hidden `.members` file naming the member
//! each file comes from. A member whose upstream fails is merged without (`.failed`); a line
//! that does not parse is left out and counted (`BuildContext::skip`).

use std::collections::HashSet;

use async_trait::async_trait;

use super::{index_line, proxy_request, Request, INDEX, KIND, UNIT};
use packyard_core::groups::{self, members_of, Reader, Sources, MEMBERS_FILE, SOURCES_FILE};
use packyard_core::publication::{BuildContext, BuildError, Builder, Rebuilds};
use packyard_model::repos::{Format, RepoType, Repository};
use packyard_store::db::publication::UnitRecord;
use packyard_store::db::Db;

const TEXT: &str = "text/plain; charset=utf-8";

pub struct SampleBuilder {
    pub page_size: i64,
    /// Reads group members.
    pub reader: Reader,
}

/// An index line's name, version, SHA-256 and size, or why it is not one.
fn parse_line(line: &str) -> Result<(&str, &str, &str, i64), String> {
    let fields: Vec<&str> = line.split(' ').collect();
    let [name, version, sha256, size] = fields.as_slice() else {
        return Err(format!("{line:?} is not `<name> <version> <sha256> <size>`"));
    };
    super::check_part("name", name)?;
    super::check_part("version", version)?;
    if sha256.len() != 64 || !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{line:?}: {sha256:?} is not a SHA-256"));
    }
    let size = size.parse().map_err(|_| format!("{line:?}: {size:?} is not a size"))?;
    Ok((name, version, sha256, size))
}

#[async_trait]
impl Builder for SampleBuilder {
    async fn build(&self, ctx: &mut BuildContext<'_>, repo: &Repository, _unit: &UnitRecord) -> Result<(), BuildError> {
        let mut index = ctx.file(INDEX, TEXT).await?;
        let mut after = 0;
        loop {
            let page = super::rows::stamped_page(ctx.db, repo.id, after, self.page_size).await?;
            let Some((last, _)) = page.last() else { break };
            after = last.id;
            for (f, _) in &page {
                index.write(index_line(&f.name, &f.version, &f.sha256, f.size).as_bytes()).await?;
            }
        }
        ctx.add(index).await.map(|_| ())
    }

    async fn merge(
        &self,
        ctx: &mut BuildContext<'_>,
        group: &Repository,
        _unit: &UnitRecord,
    ) -> Result<(), BuildError> {
        let db = ctx.db;
        let members = members_of(db, group).await?;
        let (mut text, mut listed, mut seen) = (String::new(), Vec::new(), HashSet::new());
        let mut sources = Sources::new();
        let mut failed = groups::Failed::default();
        let mut answered = 0;
        for m in &members {
            let before = failed.len();
            let index = failed.tolerate(member_index(&self.reader, db, m).await)?;
            if failed.len() > before {
                continue;
            }
            answered += 1;
            let Some((sha, _)) = index else { continue };
            if m.repo_type == RepoType::Proxy {
                sources.insert(m.name.to_string(), sha.clone());
            }
            for line in self.reader.text(&sha).await?.lines().filter(|l| !l.is_empty()) {
                match parse_line(line) {
                    Ok((name, version, sha256, size)) => {
                        let path = format!("{name}/{version}");
                        if seen.insert(path.clone()) {
                            text.push_str(&index_line(name, version, sha256, size));
                            listed.push((path, m.name.to_string()));
                        }
                    }
                    Err(why) => ctx.skip(m.name.as_str(), || why),
                }
            }
        }
        failed.none_answered(answered)?;
        ctx.put(INDEX, TEXT, text.as_bytes()).await?;
        ctx.put(MEMBERS_FILE, TEXT, groups::members_map(&listed).as_bytes()).await?;
        ctx.put(SOURCES_FILE, TEXT, groups::render_sources(&sources).as_bytes()).await?;
        ctx.put(groups::FAILED_FILE, TEXT, failed.render().as_bytes()).await
    }

    /// A member published its index: every sample group that lists it rebuilds its own.
    async fn after_publish(&self, db: &Db, unit: &UnitRecord) -> Result<Rebuilds, BuildError> {
        groups::same_unit_after_member_publish(db, unit, Format::Sample).await
    }

    /// A proxy member's upstream index, by hash.
    async fn upstream_source(&self, member: &Repository, _unit_key: &str) -> Result<Option<String>, BuildError> {
        Ok(self.reader.fetch(member, proxy_request(member, &Request::Index)).await?.map(|(sha, _)| sha))
    }
}

/// A member's index: a hosted or group member's published one, a proxy member's upstream one.
async fn member_index(reader: &Reader, db: &Db, member: &Repository) -> Result<Option<(String, i64)>, BuildError> {
    reader.file(db, member, (KIND, UNIT, INDEX), || proxy_request(member, &Request::Index)).await
}

#[cfg(test)]
mod tests {
    use super::parse_line;

    #[test]
    fn index_lines_parse_or_say_why() {
        let sha = "a".repeat(64);
        assert_eq!(parse_line(&format!("hello 1.0 {sha} 5")), Ok(("hello", "1.0", sha.as_str(), 5)));
        assert_eq!(parse_line("hello 1.0"), Err("\"hello 1.0\" is not `<name> <version> <sha256> <size>`".into()));
        assert!(parse_line(&format!("hello 1.0 {sha} five")).is_err_and(|e| e.ends_with("\"five\" is not a size")));
        assert!(parse_line("hello 1.0 abc 5").is_err_and(|e| e.ends_with("\"abc\" is not a SHA-256")));
    }
}
