//! Passwords and the bootstrap administrator. The full security model (roles, tokens, the
//! decision cache) builds on [`authenticate_password`].

use std::io::Write;
use std::path::Path;

use argon2::password_hash::{self, Output, ParamsString, PasswordHash, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use rand::Rng;

use packyard_store::db::{Db, DbError};

pub const ADMIN_USER: &str = "admin";

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("password hashing failed: {0}")]
    Hash(String),
    #[error(transparent)]
    Db(#[from] DbError),
    #[error("cannot write {path}: {source}")]
    Io { path: String, source: std::io::Error },
}

/// An argon2id PHC string.
pub fn hash_password(password: &str) -> Result<String, AuthError> {
    let fail = |e: &dyn std::fmt::Display| AuthError::Hash(e.to_string());
    let salt = SaltString::generate(&mut rand::rngs::OsRng);
    let argon = Argon2::default();
    let mut salt_buf = [0u8; 64];
    let salt_bytes = salt.decode_b64(&mut salt_buf).map_err(|e| fail(&e))?;
    let hash = Output::init_with(Params::DEFAULT_OUTPUT_LEN, |out| {
        compute(&argon, password.as_bytes(), salt_bytes, out).map_err(|_| password_hash::Error::Crypto)
    })
    .map_err(|e| fail(&e))?;
    let phc = PasswordHash {
        algorithm: Algorithm::Argon2id.ident(),
        version: Some(Version::V0x13.into()),
        params: ParamsString::try_from(argon.params()).map_err(|e| fail(&e))?,
        salt: Some(salt.as_salt()),
        hash: Some(hash),
    };
    Ok(phc.to_string())
}

/// Constant-time check of a password against a stored PHC string; a malformed hash never matches.
pub fn verify_password(password: &str, phc: &str) -> bool {
    let Ok(h) = PasswordHash::new(phc) else { return false };
    let (Some(salt), Some(expected)) = (h.salt, h.hash) else { return false };
    let Ok(algorithm) = Algorithm::try_from(h.algorithm) else { return false };
    let Ok(version) = h.version.map_or(Ok(Version::default()), Version::try_from) else { return false };
    let Ok(params) = Params::try_from(&h) else { return false };
    if !within_limits(&params) {
        return false;
    }
    let mut salt_buf = [0u8; 64];
    let Ok(salt_bytes) = salt.decode_b64(&mut salt_buf) else { return false };
    let argon = Argon2::new(algorithm, version, params);
    let mut out = vec![0u8; expected.len()];
    compute(&argon, password.as_bytes(), salt_bytes, &mut out).is_ok() && Output::new(&out).is_ok_and(|o| o == expected)
}

/// argon2's working memory (19 MiB at the default parameters) reserved as more than 32 MiB of
/// address space, of which only what the computation writes is ever resident. glibc maps a block
/// that large on its own and unmaps it when freed; a freed mapped block between its threshold and
/// 32 MiB would raise the threshold to its size instead, after which every later check's memory
/// is carved from a thread's arena and stays resident for the life of the process (56–57 MiB
/// after start and a warm-up of requests, 36 MiB this way: `loadtest/rss.sh`, docs/perf/rss.md).
/// At most one computation per core runs at once (the others wait their turn: more would not
/// finish sooner), so sign-ins under many names at once hold at most that many blocks.
/// The reservation counts in full where address space is limited (`vm.overcommit_memory = 2`,
/// `RLIMIT_AS`): allow 33 MiB per core for it there.
fn compute(argon: &Argon2<'_>, password: &[u8], salt: &[u8], out: &mut [u8]) -> argon2::Result<()> {
    const RESERVED_BLOCKS: usize = 33 * 1024; // of 1 KiB each
    let _turn = Turn::take();
    let blocks = argon.params().block_count();
    let mut memory = Vec::with_capacity(blocks.max(RESERVED_BLOCKS));
    memory.resize(blocks, Block::default());
    argon.hash_password_into_with_memory(password, salt, out, &mut memory)
}

/// One of the password computations allowed at once (one per core); given back when dropped.
struct Turn;

static RUNNING: std::sync::Mutex<usize> = std::sync::Mutex::new(0);
static FREED: std::sync::Condvar = std::sync::Condvar::new();
#[cfg(test)]
static PEAK: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Turn {
    /// Waits (on the blocking thread that computes) until fewer than one per core run.
    fn take() -> Self {
        let most = std::thread::available_parallelism().map_or(2, |n| n.get());
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        while *running >= most {
            running = FREED.wait(running).unwrap_or_else(|e| e.into_inner());
        }
        *running += 1;
        #[cfg(test)]
        PEAK.fetch_max(*running, std::sync::atomic::Ordering::SeqCst);
        Turn
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        *running = running.saturating_sub(1);
        FREED.notify_one();
    }
}

/// Stored hashes are ours, but one with costs far above any we write (a database someone else
/// wrote to) is refused rather than allowed to take gigabytes or minutes.
fn within_limits(p: &Params) -> bool {
    p.m_cost() <= 256 * 1024 && p.t_cost() <= 16 && p.p_cost() <= 16
}

/// A fresh random password of 24 characters from an unambiguous alphabet.
pub fn generate_password() -> String {
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut rng = rand::rngs::OsRng;
    (0..24).map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char).collect()
}

/// A valid argon2id hash of a random string: verified against when the user does not exist.
pub const DUMMY_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$3Gj4vcDzBXr0gRZL6UGXb7Kq2C2jRrOPvPBN8TTbi6U";

/// What bootstrap did, for the startup log.
#[derive(Debug, PartialEq, Eq)]
pub enum Bootstrap {
    AlreadyPresent,
    CreatedFromConfig,
    /// Generated; the password was written to this file and is returned to print once.
    Generated {
        password: String,
        file: std::path::PathBuf,
    },
}

/// On first start, creates `admin` (holding the built-in role `admin`, which must exist) with the configured password, or a generated one written to
/// `<data_dir>/admin.password` (mode 0600).
pub async fn bootstrap_admin(db: &Db, configured: Option<&str>, data_dir: &Path) -> Result<Bootstrap, AuthError> {
    if db.user_by_name(ADMIN_USER).await?.is_some() {
        return Ok(Bootstrap::AlreadyPresent);
    }
    let roles = vec![packyard_model::security::ADMIN_ROLE.to_string()];
    let (password, generated) = match configured {
        Some(p) => (p.to_string(), false),
        None => (generate_password(), true),
    };
    let hash = {
        let p = password.clone();
        tokio::task::spawn_blocking(move || hash_password(&p)).await.map_err(|e| AuthError::Hash(e.to_string()))??
    };
    let file = data_dir.join("admin.password");
    if generated {
        // Written before the user exists: a crash in between leaves a file and no user, and the
        // next start writes a new password.
        write_secret_file(&file, format!("{password}\n").as_bytes())?;
    }
    match db.create_user(ADMIN_USER, &hash, &roles).await {
        Ok(_) => {}
        // Another replica bootstrapped it at the same moment.
        Err(DbError::Conflict(_)) => return Ok(Bootstrap::AlreadyPresent),
        Err(e) => return Err(e.into()),
    }
    Ok(if generated { Bootstrap::Generated { password, file } } else { Bootstrap::CreatedFromConfig })
}

/// Writes a file readable only by the owner (0600), replacing it atomically.
pub fn write_secret_file(path: &Path, contents: &[u8]) -> Result<(), AuthError> {
    let io_err = |source| AuthError::Io { path: path.display().to_string(), source };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_err)?;
    }
    let tmp = path.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut f = options.open(&tmp).map_err(io_err)?;
    f.write_all(contents).map_err(io_err)?;
    f.sync_all().map_err(io_err)?;
    std::fs::rename(&tmp, path).map_err(io_err)?;
    Ok(())
}

/// `security.secret`, or one generated into `<data_dir>/secret` on first start (SQLite only;
/// config validation requires it explicitly elsewhere).
pub fn load_or_create_secret(configured: Option<&str>, data_dir: &Path) -> Result<String, AuthError> {
    if let Some(s) = configured {
        return Ok(s.to_string());
    }
    let path = data_dir.join("secret");
    match std::fs::read_to_string(&path) {
        Ok(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        // Only a missing (or empty) file means "first start": any other error must not replace
        // the secret that sealed the stored keys.
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(AuthError::Io { path: path.display().to_string(), source: e })
        }
        Ok(_) | Err(_) => {
            let secret = hex::encode(rand::random::<[u8; 32]>());
            write_secret_file(&path, secret.as_bytes())?;
            Ok(secret)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify() -> Result<(), AuthError> {
        let h = hash_password("s3cret")?;
        assert!(h.starts_with("$argon2id$"), "{h}");
        assert!(verify_password("s3cret", &h));
        assert!(!verify_password("s3cre", &h));
        assert!(!verify_password("s3cret", "not a hash"));
        assert!(PasswordHash::new(DUMMY_HASH).is_ok());
        Ok(())
    }

    /// Hashes made before (by the crate's own hasher) verify, and ours verify with the crate's
    /// verifier: the stored users' passwords keep working.
    #[test]
    fn hashes_match_the_argon2_crates_own() -> Result<(), Box<dyn std::error::Error>> {
        use argon2::password_hash::{PasswordHasher, PasswordVerifier};
        let salt = SaltString::generate(&mut rand::rngs::OsRng);
        let theirs = Argon2::default().hash_password(b"correct horse", &salt).map_err(|e| e.to_string())?.to_string();
        assert!(verify_password("correct horse", &theirs));
        assert!(!verify_password("correct hors", &theirs));
        let ours = hash_password("battery staple")?;
        let parsed = PasswordHash::new(&ours).map_err(|e| e.to_string())?;
        assert!(Argon2::default().verify_password(b"battery staple", &parsed).is_ok());
        assert!(Argon2::default().verify_password(b"battery stapler", &parsed).is_err());
        assert_eq!(parsed.params.get_decimal("m"), Some(19456));
        // Other algorithms and parameters (as a hash from elsewhere may carry) verify as well.
        let other = Argon2::new(
            Algorithm::Argon2i,
            Version::V0x13,
            Params::new(64, 3, 2, Some(24)).map_err(|e| e.to_string())?,
        );
        let theirs = other.hash_password(b"password", &salt).map_err(|e| e.to_string())?.to_string();
        assert!(theirs.starts_with("$argon2i$v=19$m=64,t=3,p=2$"), "{theirs}");
        assert!(verify_password("password", &theirs));
        assert!(!verify_password("passwore", &theirs));
        // A stored hash asking for 4 GiB of memory or a thousand passes is refused, not computed.
        assert!(within_limits(&Params::default()));
        assert!(!within_limits(&Params::new(4 * 1024 * 1024, 3, 2, None).map_err(|e| e.to_string())?));
        assert!(!within_limits(&Params::new(19456, 1000, 1, None).map_err(|e| e.to_string())?));
        let hostile = theirs.replace("m=64,t=3,p=2", "m=4194304,t=3,p=2");
        assert!(!verify_password("password", &hostile));
        assert!(!verify_password("password", "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHQ"), "no hash part");
        Ok(())
    }

    /// Checks started at once on many threads run at most one per core.
    #[test]
    fn password_checks_take_turns() {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads: Vec<_> = (0..cores * 3)
            .map(|i| std::thread::spawn(move || verify_password(&format!("guess {i}"), DUMMY_HASH)))
            .collect();
        for t in threads {
            assert_eq!(t.join().ok(), Some(false));
        }
        let peak = PEAK.load(std::sync::atomic::Ordering::SeqCst);
        assert!(peak >= 1 && peak <= cores, "{peak} checks ran at once on {cores} cores");
        assert_eq!(*RUNNING.lock().unwrap_or_else(|e| e.into_inner()), 0, "every turn was given back");
    }

    #[test]
    fn generated_passwords_differ() {
        let (a, b) = (generate_password(), generate_password());
        assert_eq!(a.len(), 24);
        assert_ne!(a, b);
    }

    #[cfg(unix)]
    #[test]
    fn secret_files_are_private() -> Result<(), Box<dyn std::error::Error>> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir()?;
        let s1 = load_or_create_secret(None, dir.path())?;
        let s2 = load_or_create_secret(None, dir.path())?;
        assert_eq!(s1, s2);
        let mode = std::fs::metadata(dir.path().join("secret"))?.permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        Ok(())
    }
}
