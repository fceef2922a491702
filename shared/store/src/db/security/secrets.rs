//! Encrypted secrets (upstream passwords, signing keys), sealed by the keystore.

use super::super::{now_ms, text, Db, DbResult};
use crate::{insert_or_ignore, sql};

impl Db {
    // --- secrets -------------------------------------------------------------------------------

    /// Stores (or replaces) an encrypted secret.
    pub async fn put_secret(&self, name: &str, nonce: &str, ciphertext: &str) -> DbResult<()> {
        let mut tx = self.begin().await?;
        self.query(sql!("secrets.delete", "DELETE FROM secrets WHERE name = $1")).bind(name).execute(&mut *tx).await?;
        self.query(sql!(
            "secrets.insert",
            "INSERT INTO secrets (name, nonce, ciphertext, created_at) VALUES ($1, $2, $3, $4)"
        ))
        .bind(name)
        .bind(nonce)
        .bind(ciphertext)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn insert_secret_if_absent(&self, name: &str, nonce: &str, ciphertext: &str) -> DbResult<bool> {
        let done = self
            .query(insert_or_ignore!(
                "secrets.insert_if_absent",
                "INSERT INTO secrets (name, nonce, ciphertext, created_at) VALUES ($1, $2, $3, $4)"
            ))
            .bind(name)
            .bind(nonce)
            .bind(ciphertext)
            .bind(now_ms())
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn get_secret(&self, name: &str) -> DbResult<Option<(String, String)>> {
        let row = self
            .query(sql!("secrets.get", "SELECT nonce, ciphertext FROM secrets WHERE name = $1"))
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        row.map(|r| Ok((text(&r, "nonce")?, text(&r, "ciphertext")?))).transpose()
    }

    /// Removes a secret; whether there was one.
    pub async fn delete_secret(&self, name: &str) -> DbResult<bool> {
        let done = self
            .query(sql!("secrets.delete_one", "DELETE FROM secrets WHERE name = $1"))
            .bind(name)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Moves secrets in one transaction, if they are as the caller read them: each of `expect`
    /// (a name and its ciphertext, `None`: absent) is read under a lock and compared, then each
    /// of `set` written (`None`: removed). False, and nothing changed, when one was changed
    /// meanwhile (a concurrent move).
    pub async fn move_secrets(
        &self,
        expect: &[(&str, Option<&str>)],
        set: &[(&str, Option<(String, String)>)],
    ) -> DbResult<bool> {
        let mut tx = self.begin().await?;
        let read = crate::for_update!("secrets.lock", "SELECT ciphertext FROM secrets WHERE name = $1");
        for (name, want) in expect {
            let row = self.query(read).bind(*name).fetch_optional(&mut *tx).await?;
            let now = row.map(|r| text(&r, "ciphertext")).transpose()?;
            if now.as_deref() != *want {
                return Ok(false);
            }
        }
        for (name, value) in set {
            self.query(sql!("secrets.delete", "DELETE FROM secrets WHERE name = $1"))
                .bind(*name)
                .execute(&mut *tx)
                .await?;
            if let Some((nonce, ct)) = value {
                let insert = sql!(
                    "secrets.insert",
                    "INSERT INTO secrets (name, nonce, ciphertext, created_at) VALUES ($1, $2, $3, $4)"
                );
                let done = self
                    .query(insert)
                    .bind(*name)
                    .bind(nonce.as_str())
                    .bind(ct.as_str())
                    .bind(now_ms())
                    .execute(&mut *tx)
                    .await;
                match done.map_err(super::super::DbError::from) {
                    Ok(_) => {}
                    // Another move inserted it first.
                    Err(super::super::DbError::Conflict(_)) => return Ok(false),
                    Err(e) => return Err(e),
                }
            }
        }
        tx.commit().await?;
        Ok(true)
    }
}
