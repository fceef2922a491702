//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/`) through the checks the fuzz
//! targets run (`packyard_codecs::fuzzing`), so that every input the fuzzer kept, and every
//! finding added as a regression input, is checked on each test run without a fuzzer.
//!
//! The ignored test `write_seeds` writes the seed inputs the corpora were grown from into
//! `target/fuzz-seeds/<target>/` (see fuzz/README.md).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use packyard_codecs::apk::testing::{build_apk, Fixture};
use packyard_codecs::apt::deb::{read_package, Limits};
use packyard_codecs::apt::testing::{ar_member, compress, control_tar, deb, small_data_member};
use packyard_codecs::fuzzing;
use packyard_codecs::go::testing::{module_zip, simple_module, ZipFile};

/// Fewer inputs than this means the corpus is missing, not that it passed.
const MIN_FILES: usize = 5;

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(Path::new(".."))
}

fn replay(target: &str, check: fn(&[u8])) -> anyhow::Result<()> {
    let dir = workspace().join("fuzz/corpus").join(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    paths.retain(|p| p.is_file());
    paths.sort();
    let mut failed = Vec::new();
    for path in &paths {
        let data = std::fs::read(path)?;
        if std::panic::catch_unwind(|| check(&data)).is_err() {
            failed.push(path.display().to_string());
        }
    }
    assert!(failed.is_empty(), "{target}: these inputs fail their checks: {failed:#?}");
    assert!(paths.len() >= MIN_FILES, "{target}: only {} inputs in {}", paths.len(), dir.display());
    Ok(())
}

#[test]
fn deb_corpus() -> anyhow::Result<()> {
    replay("deb", fuzzing::deb)
}

#[test]
fn apk_corpus() -> anyhow::Result<()> {
    replay("apk", fuzzing::apk)
}

#[test]
fn go_zip_corpus() -> anyhow::Result<()> {
    replay("go_zip", fuzzing::go_zip)
}

#[test]
fn go_path_corpus() -> anyhow::Result<()> {
    replay("go_path", fuzzing::go_path)
}

#[test]
fn conan_corpus() -> anyhow::Result<()> {
    replay("conan", fuzzing::conan)
}

const HELLO: &str = "Package: hello\nVersion: 1:2.10-3\nArchitecture: amd64\nMaintainer: A <a@example.org>\nSource: hello (2.10-3)\nDescription: says hello\n multi-line\n .\n continued\n";

/// A real `.deb` cut after its control member (the parser refuses it for its missing data member,
/// after reading everything before it).
fn deb_head(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut at = 8;
    for _ in 0..2 {
        let header = bytes.get(at..at + 60)?;
        let size: usize = String::from_utf8_lossy(&header[48..58]).trim().parse().ok()?;
        at += 60 + size + size % 2;
    }
    bytes.get(..at).map(<[u8]>::to_vec)
}

fn deb_seeds() -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    let dir = std::env::var("TEST_DEBS_DIR").map_or_else(|_| workspace().join("target/test-debs"), PathBuf::from);
    for entry in std::fs::read_dir(&dir).with_context(|| format!("real .deb files in {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "deb") {
            continue;
        }
        let bytes = std::fs::read(&path)?;
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let head = deb_head(&bytes).with_context(|| format!("{} is not a .deb", path.display()))?;
        let control = read_package(&bytes[..], Limits::default()).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        out.push((format!("real-{name}.deb"), head));
        out.push((format!("real-{name}.control"), control.text.into_bytes()));
    }
    for kind in ["", ".gz", ".xz", ".zst"] {
        out.push((format!("hello{kind}.deb"), deb(HELLO, kind)));
    }
    out.push(("hello.control".into(), HELLO.as_bytes().to_vec()));
    // An extra `_` member before the control member, and a control member that unpacks past the
    // limit of the fuzz target.
    let mut extra = b"!<arch>\n".to_vec();
    extra.extend(ar_member("debian-binary", b"2.0\n"));
    extra.extend(ar_member("_gpgorigin", b"signature"));
    extra.extend(ar_member("control.tar.gz", &compress(".gz", &control_tar(HELLO))));
    extra.extend(small_data_member());
    out.push(("extra-member.deb".into(), extra));
    let mut bomb = b"!<arch>\n".to_vec();
    bomb.extend(ar_member("debian-binary", b"2.0\n"));
    bomb.extend(ar_member("control.tar.xz", &compress(".xz", &vec![0u8; 5 << 20])));
    out.push(("bomb.deb".into(), bomb));
    Ok(out)
}

fn apk_seeds() -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut out = Vec::new();
    for signed in [false, true] {
        let f = Fixture { signed, payload: b"#!/bin/sh\n".to_vec(), ..Fixture::new("hello", "2.12-r1", "x86_64") };
        out.push((format!("hello-signed-{signed}.apk"), build_apk(&f)?.bytes));
    }
    let f = Fixture { omit_datahash: true, ..Fixture::new("nohash", "1.0-r0", "noarch") };
    out.push(("no-datahash.apk".into(), build_apk(&f)?.bytes));
    let f = Fixture { control_padding: 2 << 20, ..Fixture::new("bomb", "1.0-r0", "x86_64") };
    out.push(("bomb.apk".into(), build_apk(&f)?.bytes));
    out.push((
        "pkginfo".into(),
        b"# Generated by abuild\npkgname = a\npkgver = 1-r0\narch = noarch\nsize = 12\nbuilddate = 1700000000\nprovider_priority = 10\ndepend = b\ndepend = c>=2\nprovides = cmd:a=1-r0\ninstall_if = d e\nreplaces = f\nunknown = x\ndatahash = 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n"
            .to_vec(),
    ));
    Ok(out)
}

fn go_zip_seeds() -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let f = |n: &str, c: &str| ZipFile::new(n, c.as_bytes());
    Ok(vec![
        ("hello.zip".into(), simple_module("example.com/hello", "v1.2.3", "hi", 0)?),
        ("payload.zip".into(), simple_module("example.com/Big/v2", "v2.0.0-rc.1", "big", 300)?),
        (
            "tree.zip".into(),
            module_zip(
                "gopkg.in/yaml.v3",
                "v3.0.1",
                &[
                    f("go.mod", "module gopkg.in/yaml.v3 // yaml\n"),
                    f("LICENSE", "MIT\n"),
                    ZipFile { deflate: false, ..f("sub/dir/x.go", "package dir\n") },
                ],
            )?,
        ),
        ("incompatible.zip".into(), module_zip("example.com/m", "v2.0.0+incompatible", &[f("m.go", "package m\n")])?),
        (
            "symlink.zip".into(),
            module_zip("example.com/m", "v1.0.0", &[ZipFile { symlink: true, ..f("link", "m.go") }])?,
        ),
        (
            "lies.zip".into(),
            module_zip("example.com/m", "v1.0.0", &[ZipFile { declared_size: Some(3), ..f("a.go", "package m\n") }])?,
        ),
    ])
}

fn text_seeds(list: &[&str]) -> Vec<(String, Vec<u8>)> {
    list.iter().enumerate().map(|(i, s)| (format!("seed-{i}"), s.as_bytes().to_vec())).collect()
}

const GO_PATHS: &[&str] = &[
    "example.com/!my!mod",
    "example.com/m@v1.2.3",
    "example.com/!my!mod/v2@v2.0.0-!r!c.1",
    "gopkg.in/yaml.v3@v3.0.1",
    "gopkg.in/check.v1-unstable@v0.0.0-20201130134442-10cb98267c6c",
    "example.com/m@v2.0.0+incompatible",
    "example.com/m@v0.0.0-20191109021931-daa7c04131f5",
    "v1.2.4-0.20191109021931-daa7c04131f5+meta",
    "pkg/ü.go",
    "a b/c(1).go",
    "example.com/GIT~1/con.txt",
];

const CONAN: &[&str] = &[
    "zlib\n1.3\n_\n_",
    "pkg\n1.0+build.2\nme\nstable",
    "zlib/*\nzlib/1.3",
    "*/1.?\nZLIB/1.3\n2b8bd1e2c5a1a3d1e2f0a9b8c7d6e5f4",
    "1700000000\nconanfile.py: 0123456789ABCDEF0123456789abcdef\ninclude/x.h: 00000000000000000000000000000000\n",
    "1700000000\r\nmetadata/.conan/x.json: 0123456789abcdef0123456789abcdef\r\n",
    "conan_package.tzst\n../x\na//b\nc:x",
];

#[test]
#[ignore = "writes the seed inputs to target/fuzz-seeds (see fuzz/README.md)"]
fn write_seeds() -> anyhow::Result<()> {
    let all = [
        ("deb", deb_seeds()?),
        ("apk", apk_seeds()?),
        ("go_zip", go_zip_seeds()?),
        ("go_path", text_seeds(GO_PATHS)),
        ("conan", text_seeds(CONAN)),
    ];
    for (target, seeds) in all {
        let dir = workspace().join("target/fuzz-seeds").join(target);
        std::fs::create_dir_all(&dir)?;
        for (name, bytes) in seeds {
            std::fs::write(dir.join(name), bytes)?;
        }
    }
    Ok(())
}
