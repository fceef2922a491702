//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/`) through the checks the fuzz
//! targets run (each format's `packyard_codecs::<format>::fuzzing`), so that every input the fuzzer kept, and every
//! finding added as a regression input, is checked on each test run without a fuzzer.
//!
//! The ignored test `write_seeds` writes the seed inputs the corpora were grown from into
//! `target/fuzz-seeds/<target>/` (see fuzz/README.md).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use packyard_codecs::apk::testing::{build_apk, Fixture};
use packyard_codecs::apt::deb::{read_package, Limits};
use packyard_codecs::apt::testing::{ar_member, compress, control_tar, deb, small_data_member};
use packyard_codecs::go::testing::{module_zip, simple_module, ZipFile};
use packyard_codecs::{apk, apt, conan, go};

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
    replay("deb", apt::fuzzing::deb)
}

#[test]
fn apk_corpus() -> anyhow::Result<()> {
    replay("apk", apk::fuzzing::apk)
}

#[test]
fn go_zip_corpus() -> anyhow::Result<()> {
    replay("go_zip", go::fuzzing::go_zip)
}

#[test]
fn go_path_corpus() -> anyhow::Result<()> {
    replay("go_path", go::fuzzing::go_path)
}

#[test]
fn conan_corpus() -> anyhow::Result<()> {
    replay("conan", conan::fuzzing::conan)
}

#[test]
fn deb_control_corpus() -> anyhow::Result<()> {
    replay("deb_control", apt::fuzzing::deb_control)
}

#[test]
fn dsc_corpus() -> anyhow::Result<()> {
    replay("dsc", apt::fuzzing::dsc)
}

#[test]
fn pkginfo_corpus() -> anyhow::Result<()> {
    replay("pkginfo", apk::fuzzing::pkginfo)
}

#[test]
fn go_mod_corpus() -> anyhow::Result<()> {
    replay("go_mod", go::fuzzing::go_mod)
}

#[test]
fn conan_files_corpus() -> anyhow::Result<()> {
    replay("conan_files", conan::fuzzing::conan_files)
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

/// Control files with every field a client parses, valid and not.
const CONTROLS: &[&str] = &[
    "Package: libfoo1\nSource: foo (1.2-1)\nVersion: 2:1.2-1\nArchitecture: amd64\nMaintainer: Jane Doe <jane@example.org>\nInstalled-Size: 1234\nPre-Depends: dpkg (>= 1.17.14)\nDepends: libc6 (>= 2.34), libssl3 (>= 3.0.0) | libssl1.1,\n python3:any\nRecommends: ca-certificates\nSuggests: foo-doc\nEnhances: bar\nBreaks: libfoo0 (<< 1.0)\nConflicts: oldfoo\nReplaces: libfoo0 (<< 1.0)\nProvides: foo-abi-1 (= 1.2)\nBuilt-Using: gcc-12 (= 12.2.0-14)\nStatic-Built-Using: golang-x (= 0.1-1)\nMulti-Arch: same\nPriority: optional\nSection: libs\nEssential: no\nProtected: no\nHomepage: https://example.org/\nDescription: a library\n It does things.\n .\n  verbatim\n",
    "Package: bad\nVersion: 1.0\nArchitecture: all\nDepends: foo (>= )\n",
    "Package: bad\nVersion: 1.0\nArchitecture: all\nDepends: foo [amd64], bar <!nocheck>\n",
    "Package: bad\nVersion: 1.0\nArchitecture: all\nProvides: x (>= 1)\nMulti-Arch: same\n",
    "Package: bad\nVersion: 1.0\nArchitecture: all\nDescription: x\n .more\nDescription-md5: 12\n",
    "Package: a1\nVersion: 1\nArchitecture: all\nDepends: b1 (=1)\n",
];

const DSCS: &[&str] = &[
    "Format: 3.0 (quilt)\nSource: hello\nBinary: hello, hello-doc\nArchitecture: any all\nVersion: 2.10-3\nMaintainer: A <a@b.c>\nUploaders: B <b@c.d>\nStandards-Version: 4.6.2\nBuild-Depends: debhelper-compat (= 13), libssl-dev [!hurd-i386] <!nocheck>, gcc:native\nBuild-Conflicts: autoconf2.13\nTestsuite: autopkgtest\nTestsuite-Triggers: @builddeps@\nPackage-List:\n hello deb devel optional arch=any\nChecksums-Sha256:\n 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef 3 hello_2.10.orig.tar.gz\nFiles:\n 0123456789abcdef0123456789abcdef 3 hello_2.10.orig.tar.gz\n",
    "Format: 1.0\nSource: x1\nVersion: 1.0-1\nBuild-Depends: a [amd64 !i386]\nFiles:\n 0123456789abcdef0123456789abcdef 3 x1_1.0.tar.gz\nChecksums-Sha256:\n 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef 3 x1_1.0.tar.gz\n",
];

const PKGINFOS: &[&str] = &[
    "# Generated by abuild\npkgname = hello\npkgver = 2.12-r1\npkgdesc = says hello\nurl = https://example.org\nbuilddate = 1700000000\npackager = A <a@b.c>\nsize = 12288\narch = x86_64\norigin = hello\ncommit = 0123456789abcdef0123456789abcdef01234567\nmaintainer = A <a@b.c>\nprovider_priority = 100\nlicense = MIT\nreplaces = oldhello\ndepend = so:libc.musl-x86_64.so.1\ndepend = busybox>=1.36\ndepend = !conflicting\nprovides = cmd:hello=2.12-r1\ninstall_if = hello-base docs\ntriggers = /usr/share/hello/*\ndatahash = 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n",
    "pkgname = bad\npkgver = 1.0-r0\narch = noarch\ndepend = foo>=\nprovides = bar<2\n",
    "C:Q1abcdefghijklmnopqrstuvwxyz0=\nP:hello\nV:2.12-r1\nA:x86_64\nS:1\nI:2\nD:so:libc.musl-x86_64.so.1 busybox>=1.36\n",
];

const GO_MODS: &[&str] = &[
    "// Deprecated: use example.com/new\nmodule example.com/hello\n\ngo 1.21\n\ntoolchain go1.22.3\n\nrequire (\n\tgolang.org/x/mod v0.17.0 // indirect\n\tgithub.com/a/b/v2 v2.1.0\n\tgithub.com/c/d v3.0.0+incompatible\n)\n\nreplace example.com/old => ../old\nreplace example.com/x v1.0.0 => example.com/y v1.1.0\nexclude example.com/bad v1.2.3\nretract [v1.0.0, v1.0.5] // broken\ngodebug default=go1.21\ntool example.com/hello/cmd/gen\n",
    "module \"example.com/q\"\ngo 1.21rc1\nrequire ( )\n",
    "module example.com/m\nrequire (\n\texample.com/x v1.0.0\n",
    "module example.com/m\nretract banana\n/* x */\n",
];

const CONAN_FILES: &[&str] = &[
    "[settings]\narch=x86_64\nbuild_type=Release\nos=Linux\n\n[options]\nshared=False\n\n[requires]\nzlib/1.3.Z\nopenssl/3.2.1#abc:def\n\n[conf]\n# comment\n",
    "zlib/1.3\nlib/2.1@team/stable\nbad$/1.0\n",
    "[settings]\n[settings]\nx\n",
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
        ("deb_control", {
            let mut seeds = text_seeds(CONTROLS);
            seeds.extend(deb_seeds()?.into_iter().filter(|(n, _)| n.ends_with(".control")));
            seeds
        }),
        ("dsc", {
            let mut seeds = text_seeds(DSCS);
            let srcs =
                std::env::var("TEST_SRCS_DIR").map_or_else(|_| workspace().join("target/test-srcs"), PathBuf::from);
            for entry in std::fs::read_dir(&srcs).into_iter().flatten().flatten() {
                if entry.path().extension().is_some_and(|e| e == "dsc") {
                    seeds.push(("real.dsc".into(), std::fs::read(entry.path())?));
                }
            }
            seeds
        }),
        ("pkginfo", text_seeds(PKGINFOS)),
        ("go_mod", text_seeds(GO_MODS)),
        ("conan_files", text_seeds(CONAN_FILES)),
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
