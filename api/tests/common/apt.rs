//! The real `apt-get` and `apt-cache` in a scratch configuration of their own (no root, no
//! system state touched).

use std::path::Path;
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
