//! Storage of local users.

use sqlx::Row;

use super::{text, Db, DbResult};
use crate::sql;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRecord {
    pub id: i64,
    pub username: String,
    pub password_hash: String,
}

impl Db {
    pub async fn user_by_name(&self, username: &str) -> DbResult<Option<UserRecord>> {
        let row = self
            .query(sql!("users.get", "SELECT id, username, password_hash FROM users WHERE username = $1"))
            .bind(username)
            .fetch_optional(self.pool())
            .await?;
        row.map(|r| {
            Ok(UserRecord {
                id: r.try_get("id")?,
                username: text(&r, "username")?,
                password_hash: text(&r, "password_hash")?,
            })
        })
        .transpose()
    }
}
