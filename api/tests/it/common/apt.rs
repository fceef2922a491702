//! The real `apt-get` and `apt-cache` in a scratch configuration of their own (no root, no
//! system state touched).

use std::path::{Path, PathBuf};
use std::process::Command;

/// `apt-get` or `apt-cache` in the scratch configuration under `root`.
pub fn tool(program: &str, root: &Path, args: &[&str]) -> anyhow::Result<std::process::Output> {
    let opt = |k: &str, v: &Path| format!("{k}={}", v.display());
    let out = Command::new(program)
        .current_dir(root.join("downloads"))
        .arg("-o")
        .arg(opt("Dir::Etc::SourceList", &root.join("sources.list")))
        .arg("-o")
        .arg("Dir::Etc::SourceParts=/dev/null")
        .arg("-o")
        .arg(opt("Dir::State", &root.join("state")))
        .arg("-o")
        .arg(opt("Dir::State::status", &root.join("state/status")))
        .arg("-o")
        .arg(opt("Dir::Cache", &root.join("cache")))
        .arg("-o")
        .arg("Debug::NoLocking=1")
        .arg("-o")
        .arg("APT::Sandbox::User=root")
        .arg("-o")
        .arg("Acquire::Retries=0")
        .args(args)
        .output()?;
    Ok(out)
}

/// A scratch configuration for [`tool`]: its state, cache and download directories, an empty
/// dpkg status, the repository's key at `key.asc`, and the one sources line `line` writes for
/// that key's path.
pub fn scratch(key: &[u8], line: impl FnOnce(&PathBuf) -> String) -> anyhow::Result<tempfile::TempDir> {
    let root = tempfile::tempdir()?;
    for d in ["state/lists/partial", "cache/archives/partial", "downloads"] {
        std::fs::create_dir_all(root.path().join(d))?;
    }
    std::fs::write(root.path().join("state/status"), "")?;
    let keyring = root.path().join("key.asc");
    std::fs::write(&keyring, key)?;
    std::fs::write(root.path().join("sources.list"), format!("{}\n", line(&keyring)))?;
    Ok(root)
}
