//! The real `go` command, isolated: its own home, module cache and build cache; one `GOPROXY`;
//! no checksum database for `example.com`; modules mode; no cgo.

use std::path::Path;
use std::process::Command;

/// `go args` run in `dir` with `GOPROXY=proxy`, everything else under `home`.
pub fn command(dir: &Path, home: &Path, proxy: &str, args: &[&str]) -> Command {
    let mut c = isolated(dir, home, args);
    c.env("GOPROXY", proxy).env("GONOSUMDB", "example.com").env("GOSUMDB", "off");
    c
}

/// `go args` run in `dir` with nothing of this machine's environment but `PATH`: its home,
/// module and build caches under `home`, the local toolchain, modules mode, no cgo. The caller
/// sets `GOPROXY` and the checksum database.
pub fn isolated(dir: &Path, home: &Path, args: &[&str]) -> Command {
    isolated_tool("go", dir, home, args)
}

/// Another program of the Go toolchain's (`govulncheck`) with [`command`]'s environment.
pub fn tool(program: &str, dir: &Path, home: &Path, proxy: &str, args: &[&str]) -> Command {
    let mut c = isolated_tool(program, dir, home, args);
    c.env("GOPROXY", proxy).env("GONOSUMDB", "example.com").env("GOSUMDB", "off");
    c
}

fn isolated_tool(program: &str, dir: &Path, home: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(program);
    c.args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("GOPATH", home.join("gopath"))
        .env("GOMODCACHE", home.join("modcache"))
        .env("GOCACHE", home.join("gocache"))
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .env("GO111MODULE", "on")
        .env("CGO_ENABLED", "0");
    c
}
