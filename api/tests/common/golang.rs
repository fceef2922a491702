//! The real `go` command, isolated: its own home, module cache and build cache; one `GOPROXY`;
//! no checksum database for `example.com`; modules mode; no cgo.

use std::path::Path;
use std::process::Command;

/// `go args` run in `dir` with `GOPROXY=proxy`, everything else under `home`.
pub fn command(dir: &Path, home: &Path, proxy: &str, args: &[&str]) -> Command {
    let mut c = Command::new("go");
    c.args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("GOPATH", home.join("gopath"))
        .env("GOMODCACHE", home.join("modcache"))
        .env("GOCACHE", home.join("gocache"))
        .env("GOPROXY", proxy)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .env("GONOSUMDB", "example.com")
        .env("GOSUMDB", "off")
        .env("GO111MODULE", "on")
        .env("CGO_ENABLED", "0");
    c
}
