//! The internal test format: entries (name, body) per unit; a snapshot holds `index.txt` (one
//! `name<TAB>sha256(body)` line per entry, in name order), `count.txt`, and the index again under
//! `by-hash/<sha256 of index.txt>` (as APT clients fetch indexes by hash). It exists to prove the
//! pipeline before any real format, and stays as its smallest example.

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use super::{BuildContext, BuildError, Builder};
use packyard_model::repos::Repository;
use packyard_store::db::publication::UnitRecord;

pub const KIND: &str = "test";

/// The line of `index.txt` for an entry.
pub fn index_line(name: &str, body: &str) -> String {
    format!("{name}\t{}\n", hex::encode(Sha256::digest(body.as_bytes())))
}

/// The `index.txt` of a unit holding `entries` (name, body).
pub fn index(entries: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = entries.iter().collect();
    sorted.sort();
    sorted.into_iter().map(|(n, b)| index_line(n, b)).collect()
}

pub struct TestFormat {
    /// Rows per keyset page (small in tests to prove paging).
    pub page_size: i64,
    /// Time each build waits before writing (`debug.build_delay_ms`).
    pub delay: std::time::Duration,
}

#[async_trait]
impl Builder for TestFormat {
    async fn build(&self, ctx: &mut BuildContext<'_>, _repo: &Repository, unit: &UnitRecord) -> Result<(), BuildError> {
        if unit.unit_key.contains("fail") {
            return Err(BuildError::Other(format!("test unit {} is built to fail", unit.unit_key)));
        }
        let mut index = ctx.file("index.txt", "text/plain; charset=utf-8").await?;
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        let mut after = String::new();
        let mut count = 0u64;
        loop {
            let page = ctx.db.test_entries_page(unit.id, &after, self.page_size).await?;
            let Some((last, _)) = page.last() else { break };
            after = last.clone();
            for (name, body) in &page {
                index.write(index_line(name, body).as_bytes()).await?;
                count += 1;
            }
        }
        let digest = ctx.add(index).await?;
        ctx.alias(&format!("by-hash/{digest}"), "index.txt")?;
        ctx.put("count.txt", "text/plain; charset=utf-8", format!("{count}\n").as_bytes()).await
    }
}
