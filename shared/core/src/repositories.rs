//! The repository operations of the admin API, with the rules that need the database: members
//! exist, share the group's format, and no group reaches itself; a group member is not deleted;
//! PUT replaces a whole definition. Each format checks its own settings (`FormatSpec::settings`).

use std::collections::{BTreeMap, BTreeSet};

use packyard_model::repos::{InvalidRepository, NewRepository, Repository, RepositorySpec};
use packyard_store::db::{Db, DbError};

use crate::formats::Part;

#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    #[error("{0}")]
    Invalid(String),
    #[error("repository {0} not found")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Db(DbError),
}

impl From<DbError> for RepoError {
    fn from(e: DbError) -> Self {
        match e {
            DbError::Conflict(m) => Self::Conflict(m),
            other => Self::Db(other),
        }
    }
}

impl From<InvalidRepository> for RepoError {
    fn from(e: InvalidRepository) -> Self {
        Self::Invalid(e.0)
    }
}

/// The repository operations of the admin API, with the rules that need the database; each
/// format checks its own settings (the registry's `validate`).
pub struct RepositoryService<'a> {
    db: &'a Db,
    formats: &'a crate::formats::Registry,
    /// Repositories of the test-only format may be made (`debug.test_format`).
    test_formats: bool,
}

impl<'a> RepositoryService<'a> {
    pub fn new(db: &'a Db, formats: &'a crate::formats::Registry) -> Self {
        Self { db, formats, test_formats: false }
    }

    /// Lets repositories of the test-only format be made (`debug.test_format`).
    pub fn with_test_formats(self, test_formats: bool) -> Self {
        Self { test_formats, ..self }
    }

    pub async fn create(&self, spec: RepositorySpec) -> Result<Repository, RepoError> {
        self.formats.check_offered(spec.format, self.test_formats)?;
        let new = self.formats.validate(spec, None).map_err(|e| e.into_invalid(None))?;
        if self.db.repository_by_name(new.name.as_str()).await?.is_some() {
            return Err(RepoError::Conflict(format!("repository {} already exists", new.name)));
        }
        self.check_members(&new).await?;
        Ok(self.db.insert_repository(&new).await?)
    }

    pub async fn get(&self, name: &str) -> Result<Repository, RepoError> {
        self.db.repository_by_name(name).await?.ok_or_else(|| RepoError::NotFound(name.to_string()))
    }

    pub async fn list(&self) -> Result<Vec<Repository>, RepoError> {
        Ok(self.db.list_repositories().await?)
    }

    /// Replaces a repository's definition (PUT): the body is the whole definition, so it may not
    /// leave out format settings the repository has (they would silently return to defaults).
    pub async fn update(&self, name: &str, spec: RepositorySpec) -> Result<Repository, RepoError> {
        let current = self.get(name).await?;
        self.replace(&current, spec, true).await
    }

    /// Applies a definition without the PUT rule about omitted settings (a patched definition
    /// carries every setting already).
    pub async fn apply(&self, name: &str, spec: RepositorySpec) -> Result<Repository, RepoError> {
        let current = self.get(name).await?;
        self.replace(&current, spec, false).await
    }

    /// `whole`: the body is a whole definition (PUT), which may not leave out format settings
    /// the repository has (they would silently return to their defaults).
    async fn replace(&self, current: &Repository, spec: RepositorySpec, whole: bool) -> Result<Repository, RepoError> {
        let name = current.name.as_str();
        // A block the repository stores that the body leaves out.
        let omitted = current.settings.blocks.keys().find(|k| !spec.formats.0.contains_key(k.as_str())).cloned();
        // A patched definition that is not of the format's settings' shape says so as a patch.
        let shape = (!whole).then_some("the patched definition is invalid");
        let new = self.formats.validate(spec, Some(name)).map_err(|e| e.into_invalid(shape))?;
        if new.format != current.format {
            return Err(RepoError::Invalid(format!(
                "the format of repository {name} is {} and cannot be changed",
                current.format
            )));
        }
        if new.repo_type != current.repo_type {
            return Err(RepoError::Invalid(format!(
                "the type of repository {name} is {} and cannot be changed",
                current.repo_type
            )));
        }
        if let (true, Some(key)) = (whole, omitted) {
            return Err(RepoError::Invalid(format!(
                "the body has no `{key}` settings, which repository {name} has: PUT replaces the whole definition, so send `{key}` as GET shows it, or change single fields with PATCH (a JSON merge patch)"
            )));
        }
        self.check_members(&new).await?;
        self.check_as_member(current, &new).await?;
        // Another upstream: nothing fetched from the old one is served for the new one.
        let upstream = |s: &packyard_model::repos::StoredSettings| s.proxy.as_ref().map(|p| p.remote_url.clone());
        let forget_cache = upstream(&current.settings) != upstream(&new.settings);
        match self.db.update_repository(current.id, &new, forget_cache).await {
            Err(DbError::NotFound) => Err(RepoError::NotFound(name.to_string())),
            other => Ok(other?),
        }
    }

    pub async fn delete(&self, name: &str) -> Result<(), RepoError> {
        let current = self.get(name).await?;
        let groups = self.db.groups_containing(current.id).await?;
        if !groups.is_empty() {
            return Err(RepoError::Conflict(format!(
                "repository {name} is a member of group {}; remove it from the group first",
                groups.join(", ")
            )));
        }
        match self.db.delete_repository(current.id).await {
            Err(DbError::NotFound) => Err(RepoError::NotFound(name.to_string())),
            other => Ok(other?),
        }
    }

    /// A changed repository that is a group's member: each group can still publish it (the
    /// format's `check_member`).
    async fn check_as_member(&self, current: &Repository, new: &NewRepository) -> Result<(), RepoError> {
        let groups = self.db.groups_containing(current.id).await?;
        if groups.is_empty() {
            return Ok(());
        }
        let spec = self.formats.get(new.format);
        for group in groups {
            if let Some(g) = self.db.repository_by_name(&group).await? {
                spec.check_member(Part::of(&g), Part::new(new)).map_err(|why| {
                    RepoError::Invalid(format!("repository {} is a member of group {group}: {why}", new.name))
                })?;
            }
        }
        Ok(())
    }

    /// Members exist, share the group's format, can be published by it (the format's
    /// `check_member`), and no group reaches itself.
    async fn check_members(&self, new: &NewRepository) -> Result<(), RepoError> {
        if new.members.is_empty() {
            return Ok(());
        }
        let all = self.db.list_repositories().await?;
        let by_name: BTreeMap<&str, &Repository> = all.iter().map(|r| (r.name.as_str(), r)).collect();
        for m in &new.members {
            let repo = by_name
                .get(m.as_str())
                .ok_or_else(|| RepoError::Invalid(format!("group member {m} does not exist")))?;
            if repo.format != new.format {
                return Err(RepoError::Invalid(format!(
                    "group member {m} is a {} repository; a {} group can only contain {} repositories",
                    repo.format, new.format, new.format
                )));
            }
            self.formats.get(new.format).check_member(Part::new(new), Part::of(repo)).map_err(RepoError::Invalid)?;
        }
        // Depth-first from each new member over the stored edges (with this group's new edges).
        let edges = |n: &str| -> Vec<String> {
            if n == new.name.as_str() {
                new.members.iter().map(|m| m.as_str().to_string()).collect()
            } else {
                by_name.get(n).map(|r| r.members.clone()).unwrap_or_default()
            }
        };
        let mut stack: Vec<(String, Vec<String>)> =
            new.members.iter().map(|m| (m.as_str().to_string(), vec![new.name.to_string()])).collect();
        let mut visited = BTreeSet::new();
        while let Some((node, path)) = stack.pop() {
            if node == new.name.as_str() {
                let mut cycle = path.clone();
                cycle.push(node);
                return Err(RepoError::Invalid(format!("group members form a cycle: {}", cycle.join(" -> "))));
            }
            if !visited.insert(node.clone()) {
                continue;
            }
            for next in edges(&node) {
                let mut p = path.clone();
                p.push(node.clone());
                stack.push((next, p));
            }
        }
        Ok(())
    }
}
