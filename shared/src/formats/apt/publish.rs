//! The APT snapshot of one distribution: per component and architecture `Packages`,
//! `Packages.gz` and `Packages.xz` (with `Architecture: all` packages in every architecture's index), their
//! `by-hash` names, and `Release` with MD5Sum/SHA1/SHA256/SHA512 sections. Rows stream in keyset
//! pages; only one page and the compressor's buffer are in memory at a time.

use std::fmt::Write as _;
use std::io::Write as _;

use async_trait::async_trait;
use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};

use super::hosted::KIND;
use super::packages::{render_stanza, PoolFile};
use crate::db::publication::UnitRecord;
use crate::publication::{BuildContext, BuildError, Builder};

pub struct AptBuilder {
    pub page_size: i64,
    /// Where each repository's signing key is sealed.
    pub keystore: std::sync::Arc<crate::security::keystore::KeyStore>,
}

/// The four digests and the size of one index file, as Release lists them.
struct Hashed {
    path: String,
    size: u64,
    md5: String,
    sha1: String,
    sha256: String,
    sha512: String,
}

#[derive(Default)]
struct Hashers {
    md5: Md5,
    sha1: Sha1,
    sha256: Sha256,
    sha512: Sha512,
    size: u64,
}

impl Hashers {
    fn update(&mut self, b: &[u8]) {
        self.md5.update(b);
        self.sha1.update(b);
        self.sha256.update(b);
        self.sha512.update(b);
        self.size += b.len() as u64;
    }

    fn finish(self, path: String) -> Hashed {
        Hashed {
            path,
            size: self.size,
            md5: hex::encode(self.md5.finalize()),
            sha1: hex::encode(self.sha1.finalize()),
            sha256: hex::encode(self.sha256.finalize()),
            sha512: hex::encode(self.sha512.finalize()),
        }
    }
}

const TEXT: &str = "text/plain; charset=utf-8";

#[async_trait]
impl Builder for AptBuilder {
    fn kind(&self) -> &'static str {
        KIND
    }

    async fn build(&self, ctx: &mut BuildContext<'_>, unit: &UnitRecord) -> Result<(), BuildError> {
        let repo = ctx
            .db
            .repository_by_id(unit.repository_id)
            .await?
            .ok_or_else(|| BuildError::Other(format!("repository {} is gone", unit.repository_id)))?;
        let settings = repo.settings.apt.clone().unwrap_or_default();
        let dist = unit.unit_key.as_str();
        let mut archs: Vec<&str> = settings.architectures.iter().map(String::as_str).filter(|a| *a != "all").collect();
        if archs.is_empty() {
            archs.push("all");
        }
        let mut indexes = Vec::new();
        for component in &settings.components {
            for arch in &archs {
                let base = format!("{component}/binary-{arch}");
                indexes.extend(self.index(ctx, repo.id, component, arch, dist, &base).await?);
            }
        }
        let now = crate::db::now_ms();
        let mut release = String::new();
        let origin = settings.origin.clone().unwrap_or_else(|| repo.name.to_string());
        let label = settings.label.clone().unwrap_or_else(|| repo.name.to_string());
        let _ = write!(
            release,
            "Origin: {origin}\nLabel: {label}\nSuite: {dist}\nCodename: {dist}\nDate: {}\nArchitectures: {}\nComponents: {}\nDescription: {} served by Packyard\nAcquire-By-Hash: yes\n",
            crate::time::rfc1123_utc(now),
            archs.join(" "),
            settings.components.join(" "),
            repo.name
        );
        for (section, pick) in [
            ("MD5Sum", (|h: &Hashed| h.md5.clone()) as fn(&Hashed) -> String),
            ("SHA1", |h: &Hashed| h.sha1.clone()),
            ("SHA256", |h: &Hashed| h.sha256.clone()),
            ("SHA512", |h: &Hashed| h.sha512.clone()),
        ] {
            let _ = writeln!(release, "{section}:");
            for h in &indexes {
                let _ = writeln!(release, " {} {:>16} {}", pick(h), h.size, h.path);
            }
        }
        let signer = super::signing::Signer::for_repository(
            ctx.db,
            &self.keystore,
            repo.id,
            &format!("{label} (Packyard repository {}) <packyard@{}>", repo.name, repo.name),
        )
        .await
        .map_err(|e| BuildError::Other(format!("signing key: {e}")))?;
        let inrelease = signer.clearsign(&release).map_err(|e| BuildError::Other(e.to_string()))?;
        let detached = signer.detached(release.as_bytes()).map_err(|e| BuildError::Other(e.to_string()))?;
        ctx.put(&format!("dists/{dist}/Release"), TEXT, release.as_bytes()).await?;
        ctx.put(&format!("dists/{dist}/InRelease"), TEXT, inrelease.as_bytes()).await?;
        ctx.put(&format!("dists/{dist}/Release.gpg"), "application/pgp-signature", detached.as_bytes()).await?;
        Ok(())
    }
}

impl AptBuilder {
    /// Streams one architecture's index into `Packages` and `Packages.gz`, adds their by-hash
    /// names, and returns what Release lists for both.
    async fn index(
        &self,
        ctx: &mut BuildContext<'_>,
        repo: i64,
        component: &str,
        arch: &str,
        dist: &str,
        base: &str,
    ) -> Result<[Hashed; 3], BuildError> {
        let plain_path = format!("dists/{dist}/{base}/Packages");
        let gz_path = format!("dists/{dist}/{base}/Packages.gz");
        let xz_path = format!("dists/{dist}/{base}/Packages.xz");
        let mut plain = ctx.file(&plain_path, TEXT).await?;
        let mut gz = ctx.file(&gz_path, "application/gzip").await?;
        let mut xz = ctx.file(&xz_path, "application/x-xz").await?;
        let mut plain_hash = Hashers::default();
        let mut gz_hash = Hashers::default();
        let mut xz_hash = Hashers::default();
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let mut xz_encoder = liblzma::write::XzEncoder::new(Vec::new(), 6);
        let mut after = 0i64;
        let mut text = String::new();
        loop {
            let page = ctx.db.apt_index_page(repo, component, arch, after, self.page_size).await?;
            let Some(last) = page.last() else { break };
            after = last.id;
            text.clear();
            for p in &page {
                let file = PoolFile {
                    filename: &p.pool_path,
                    size: u64::try_from(p.size).unwrap_or(0),
                    md5: &p.md5,
                    sha1: &p.sha1,
                    sha256: &p.sha256,
                    sha512: &p.sha512,
                };
                render_stanza(&mut text, &p.control, &file);
            }
            plain.write(text.as_bytes()).await?;
            plain_hash.update(text.as_bytes());
            encoder.write_all(text.as_bytes()).map_err(|e| BuildError::Other(e.to_string()))?;
            let compressed = std::mem::take(encoder.get_mut());
            gz.write(&compressed).await?;
            gz_hash.update(&compressed);
            xz_encoder.write_all(text.as_bytes()).map_err(|e| BuildError::Other(e.to_string()))?;
            let compressed = std::mem::take(xz_encoder.get_mut());
            xz.write(&compressed).await?;
            xz_hash.update(&compressed);
        }
        let tail = encoder.finish().map_err(|e| BuildError::Other(e.to_string()))?;
        gz.write(&tail).await?;
        gz_hash.update(&tail);
        let tail = xz_encoder.finish().map_err(|e| BuildError::Other(e.to_string()))?;
        xz.write(&tail).await?;
        xz_hash.update(&tail);
        ctx.add(plain).await?;
        ctx.add(gz).await?;
        ctx.add(xz).await?;
        let plain_h = plain_hash.finish(format!("{base}/Packages"));
        let gz_h = gz_hash.finish(format!("{base}/Packages.gz"));
        let xz_h = xz_hash.finish(format!("{base}/Packages.xz"));
        for h in [&plain_h, &gz_h, &xz_h] {
            let full = format!("dists/{dist}/{}", h.path);
            ctx.alias(&format!("dists/{dist}/{base}/by-hash/SHA256/{}", h.sha256), &full)?;
            ctx.alias(&format!("dists/{dist}/{base}/by-hash/SHA512/{}", h.sha512), &full)?;
        }
        Ok([plain_h, gz_h, xz_h])
    }
}
