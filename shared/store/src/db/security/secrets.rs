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
}
