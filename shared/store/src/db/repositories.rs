//! Storage of repositories and group membership.

use sqlx::any::AnyRow;
use sqlx::Row;

use super::{now_ms, text, Db, DbError, DbResult};
use crate::{insert_id, sql};
use packyard_model::repos::{NewRepository, RepoName, Repository, StoredSettings};

macro_rules! columns {
    () => {
        "id, name, format, kind, settings, write_policy, anonymous_read, version, created_at, updated_at"
    };
}

fn parse_row(row: &AnyRow) -> DbResult<Repository> {
    let corrupt = |what: &str, v: &str| DbError::Corrupt(format!("repository {what} {v:?}"));
    let name = text(row, "name")?;
    let format = text(row, "format")?;
    let kind = text(row, "kind")?;
    let policy = text(row, "write_policy")?;
    let settings = text(row, "settings")?;
    Ok(Repository {
        id: row.try_get("id")?,
        name: RepoName::parse(&name).map_err(|_| corrupt("name", &name))?,
        format: format.parse().map_err(|_| corrupt("format", &format))?,
        repo_type: kind.parse().map_err(|_| corrupt("type", &kind))?,
        settings: serde_json::from_str::<StoredSettings>(&settings).map_err(|_| corrupt("settings", &settings))?,
        write_policy: policy.parse().map_err(|_| corrupt("write policy", &policy))?,
        anonymous_read: row.try_get::<i64, _>("anonymous_read")? != 0,
        members: Vec::new(),
        version: row.try_get("version")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

fn settings_json(new: &NewRepository) -> DbResult<String> {
    serde_json::to_string(&new.settings).map_err(|e| DbError::Corrupt(format!("settings: {e}")))
}

impl Db {
    pub async fn repository_by_name(&self, name: &str) -> DbResult<Option<Repository>> {
        let row = self
            .query(sql!("repositories.get", concat!("SELECT ", columns!(), " FROM repositories WHERE name = $1")))
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        let Some(row) = row else { return Ok(None) };
        let mut repo = parse_row(&row)?;
        repo.members = self.member_names(repo.id).await?;
        Ok(Some(repo))
    }

    pub async fn repository_by_id(&self, id: i64) -> DbResult<Option<Repository>> {
        let row = self
            .query(sql!("repositories.by_id", "SELECT name FROM repositories WHERE id = $1"))
            .bind(id)
            .fetch_optional(self.pool())
            .await?;
        match row {
            Some(r) => self.repository_by_name(&text(&r, "name")?).await,
            None => Ok(None),
        }
    }

    /// Every repository ordered by name, with group members.
    pub async fn list_repositories(&self) -> DbResult<Vec<Repository>> {
        let rows = self
            .query(sql!("repositories.list", concat!("SELECT ", columns!(), " FROM repositories ORDER BY name")))
            .fetch_all(self.pool())
            .await?;
        let mut repos = rows.iter().map(parse_row).collect::<DbResult<Vec<_>>>()?;
        let edges = self
            .query(sql!(
                "group_members.list",
                "SELECT gm.group_id AS group_id, r.name AS member FROM group_members gm JOIN repositories r ON r.id = gm.member_id ORDER BY gm.group_id, gm.position"
            ))
            .fetch_all(self.pool())
            .await?;
        for e in &edges {
            let gid: i64 = e.try_get("group_id")?;
            let member = text(e, "member")?;
            if let Some(g) = repos.iter_mut().find(|r| r.id == gid) {
                g.members.push(member);
            }
        }
        Ok(repos)
    }

    async fn member_names(&self, group_id: i64) -> DbResult<Vec<String>> {
        let rows = self.query(sql!("group_members.get", "SELECT r.name AS member FROM group_members gm JOIN repositories r ON r.id = gm.member_id WHERE gm.group_id = $1 ORDER BY gm.position"))
            .bind(group_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(|r| text(r, "member")).collect()
    }

    /// Names of the groups that list the repository as a member.
    pub async fn groups_containing(&self, member_id: i64) -> DbResult<Vec<String>> {
        let rows = self.query(sql!("group_members.containing", "SELECT r.name AS name FROM group_members gm JOIN repositories r ON r.id = gm.group_id WHERE gm.member_id = $1 ORDER BY r.name"))
            .bind(member_id)
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(|r| text(r, "name")).collect()
    }

    /// Inserts the repository and its members in one transaction. A taken name is a conflict.
    pub async fn insert_repository(&self, new: &NewRepository) -> DbResult<Repository> {
        let now = now_ms();
        let settings = settings_json(new)?;
        let mut tx = self.begin().await?;
        let insert = self
            .query(insert_id!("repositories.insert", "INSERT INTO repositories (name, format, kind, settings, write_policy, anonymous_read, version, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8)"))
            .bind(new.name.as_str())
            .bind(new.format.as_str())
            .bind(new.repo_type.as_str())
            .bind(settings)
            .bind(new.write_policy.as_str())
            .bind(i64::from(new.anonymous_read))
            .bind(now)
            .bind(now);
        let id = self.insert_id(insert, &mut *tx).await.map_err(|e| match e {
            DbError::Conflict(_) => DbError::Conflict(format!("repository {} already exists", new.name)),
            other => other,
        })?;
        self.replace_members(&mut tx, id, &new.members).await?;
        self.bump_watermark(&mut tx, super::security::REPOSITORIES).await?;
        let (name, format, kind) = (new.name.as_str(), new.format.as_str(), new.repo_type.as_str());
        self.repository_event_in(&mut tx, "repository.created", (name, format, kind)).await?;
        tx.commit().await?;
        self.repository_by_name(new.name.as_str()).await?.ok_or(DbError::NotFound)
    }

    /// The webhook event of a change to a repository, in the change's transaction.
    async fn repository_event_in(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        event: &str,
        (name, format, kind): (&str, &str, &str),
    ) -> DbResult<()> {
        let payload = serde_json::json!({"repository": {"name": name, "format": format, "type": kind}}).to_string();
        self.enqueue_webhook_event_in(tx, event, Some(name), &payload).await?;
        Ok(())
    }

    async fn replace_members(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
        group_id: i64,
        members: &[RepoName],
    ) -> DbResult<()> {
        self.query(sql!("group_members.clear", "DELETE FROM group_members WHERE group_id = $1"))
            .bind(group_id)
            .execute(&mut **tx)
            .await?;
        for (position, member) in members.iter().enumerate() {
            let done = self.query(sql!("group_members.insert", "INSERT INTO group_members (group_id, member_id, position) SELECT $1, id, $2 FROM repositories WHERE name = $3"))
                .bind(group_id)
                .bind(i64::try_from(position).unwrap_or(i64::MAX))
                .bind(member.as_str())
                .execute(&mut **tx)
                .await?;
            if done.rows_affected() != 1 {
                return Err(DbError::Conflict(format!("group member {member} no longer exists")));
            }
        }
        Ok(())
    }

    /// Replaces settings, policy, flags and members; bumps the watermark.
    /// `forget_cache`: a proxy's upstream changed, so what it fetched from the old one (its
    /// `proxy_cache` rows and the catalogue's cached components) goes in the same transaction;
    /// the blobs are collected once nothing references them.
    pub async fn update_repository(&self, id: i64, new: &NewRepository, forget_cache: bool) -> DbResult<Repository> {
        let settings = settings_json(new)?;
        let mut tx = self.begin().await?;
        if forget_cache {
            for stmt in [
                sql!("proxy_cache.forget_repository", "DELETE FROM proxy_cache WHERE repository_id = $1"),
                sql!("assets.forget_repository", "DELETE FROM assets WHERE repository_id = $1"),
                sql!("components.forget_repository", "DELETE FROM components WHERE repository_id = $1"),
            ] {
                self.query(stmt).bind(id).execute(&mut *tx).await?;
            }
        }
        let done = self.query(sql!("repositories.update", "UPDATE repositories SET settings = $1, write_policy = $2, anonymous_read = $3, version = version + 1, updated_at = $4 WHERE id = $5"))
            .bind(settings)
            .bind(new.write_policy.as_str())
            .bind(i64::from(new.anonymous_read))
            .bind(now_ms())
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() != 1 {
            return Err(DbError::NotFound);
        }
        self.replace_members(&mut tx, id, &new.members).await?;
        self.bump_watermark(&mut tx, super::security::REPOSITORIES).await?;
        let (name, format, kind) = (new.name.as_str(), new.format.as_str(), new.repo_type.as_str());
        self.repository_event_in(&mut tx, "repository.updated", (name, format, kind)).await?;
        tx.commit().await?;
        self.repository_by_name(new.name.as_str()).await?.ok_or(DbError::NotFound)
    }

    pub async fn delete_repository(&self, id: i64) -> DbResult<()> {
        let mut tx = self.begin().await?;
        let what = sql!("repositories.identity", "SELECT name, format, kind FROM repositories WHERE id = $1");
        let row = self.bound(what, (id,)).fetch_optional(&mut *tx).await?.ok_or(DbError::NotFound)?;
        let (name, format, kind) = (text(&row, "name")?, text(&row, "format")?, text(&row, "kind")?);
        self.repository_event_in(&mut tx, "repository.deleted", (&name, &format, &kind)).await?;
        self.query(sql!("group_members.clear", "DELETE FROM group_members WHERE group_id = $1"))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let done = self
            .query(sql!("repositories.delete", "DELETE FROM repositories WHERE id = $1"))
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(|e| match DbError::from(e) {
                // A group took it as a member meanwhile (foreign key).
                DbError::Other(_) => DbError::Conflict("repository is a member of a group".into()),
                other => other,
            })?;
        if done.rows_affected() != 1 {
            return Err(DbError::NotFound);
        }
        self.bump_watermark(&mut tx, super::security::REPOSITORIES).await?;
        tx.commit().await?;
        Ok(())
    }
}
