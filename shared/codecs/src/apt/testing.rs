//! Building `.deb` files in tests (feature `testing`): an ar archive with `debian-binary`, a
//! control member compressed as asked (`""`, `.gz`, `.xz`, `.zst`) and a small data member (a
//! whole tar, as every package must carry).

use std::io;

/// An ar member: header + data + padding.
pub fn ar_member(name: &str, data: &[u8]) -> Vec<u8> {
    let mut out =
        format!("{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n", format!("{name}"), 0, 0, 0, 100644, data.len()).into_bytes();
    out.extend_from_slice(data);
    if data.len() % 2 == 1 {
        out.push(b'\n');
    }
    out
}

/// A tar holding `./control` (and a postinst, as real packages do).
pub fn control_tar(control: &str) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, body) in [("./postinst", "#!/bin/sh\n"), ("./control", control)] {
        let mut h = tar::Header::new_gnu();
        h.set_size(body.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        let _ = b.append_data(&mut h, path, body.as_bytes());
    }
    b.into_inner().unwrap_or_default()
}

pub fn compress(kind: &str, data: &[u8]) -> Vec<u8> {
    match kind {
        "" => data.to_vec(),
        ".gz" => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            let _ = io::Write::write_all(&mut e, data);
            e.finish().unwrap_or_default()
        }
        ".xz" => {
            let mut e = liblzma::write::XzEncoder::new(Vec::new(), 6);
            let _ = io::Write::write_all(&mut e, data);
            e.finish().unwrap_or_default()
        }
        ".zst" => ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest),
        _ => Vec::new(),
    }
}

/// A package that dpkg can install: a real `data.tar.xz` holding `files` (paths like
/// `./usr/share/x/y`, directories created as needed).
pub fn installable_deb(control: &str, files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut dirs = std::collections::BTreeSet::new();
    for (path, _) in files {
        let mut p = std::path::Path::new(path).parent();
        while let Some(d) = p.filter(|d| !d.as_os_str().is_empty() && d.as_os_str() != ".") {
            dirs.insert(format!("{}/", d.display()));
            p = d.parent();
        }
    }
    let dirs: Vec<&str> = dirs.iter().map(String::as_str).collect();
    let mut out = b"!<arch>\n".to_vec();
    out.extend(ar_member("debian-binary", b"2.0\n"));
    out.extend(ar_member("control.tar.gz", &compress(".gz", &control_tar(control))));
    out.extend(ar_member("data.tar.xz", &compress(".xz", &tar_with(&dirs, files))));
    out
}

/// A tar holding one regular file per `(path, body)`.
pub fn data_tar(files: &[(&str, &[u8])]) -> Vec<u8> {
    tar_with(&[], files)
}

/// A tar of directory entries, then regular files.
fn tar_with(dirs: &[&str], files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let entries = dirs.iter().map(|d| (*d, &[][..], tar::EntryType::Directory, 0o755));
    for (path, body, kind, mode) in entries.chain(files.iter().map(|(p, b)| (*p, *b, tar::EntryType::Regular, 0o644))) {
        let mut h = tar::Header::new_gnu();
        h.set_size(body.len() as u64);
        h.set_mode(mode);
        h.set_entry_type(kind);
        h.set_cksum();
        let _ = b.append_data(&mut h, path, body);
    }
    b.into_inner().unwrap_or_default()
}

/// The data member every [`deb`] carries: `data.tar.xz` with one small file.
pub fn small_data_member() -> Vec<u8> {
    ar_member("data.tar.xz", &compress(".xz", &data_tar(&[("./usr/share/doc/payload", b"payload")])))
}

pub fn deb(control: &str, kind: &str) -> Vec<u8> {
    let mut out = b"!<arch>\n".to_vec();
    out.extend(ar_member("debian-binary", b"2.0\n"));
    out.extend(ar_member(&format!("control.tar{kind}"), &compress(kind, &control_tar(control))));
    out.extend(small_data_member());
    out
}

/// A tar.xz of `files` (path, bytes), as a source package's tarballs are.
fn source_tarball(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (path, body) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(body.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(1_700_000_000);
        h.set_entry_type(tar::EntryType::Regular);
        h.set_cksum();
        let _ = b.append_data(&mut h, path, body.as_slice());
    }
    compress(".xz", &b.into_inner().unwrap_or_default())
}

/// The `debian/` directory of a source package under `top`.
fn debian_dir(top: &str, source: &str, version: &str, format: &str) -> Vec<(String, Vec<u8>)> {
    let changelog = format!(
        "{source} ({version}) unstable; urgency=medium\n\n  * Test.\n\n -- Packyard <packyard@example.org>  Mon, 01 Jan 2024 00:00:00 +0000\n"
    );
    let control = format!(
        "Source: {source}\nSection: misc\nPriority: optional\nMaintainer: Packyard <packyard@example.org>\n\nPackage: {source}\nArchitecture: all\nDescription: test\n test\n"
    );
    vec![
        (format!("{top}/debian/changelog"), changelog.into_bytes()),
        (format!("{top}/debian/control"), control.into_bytes()),
        (format!("{top}/debian/source/format"), format!("{format}\n").into_bytes()),
        (format!("{top}/debian/rules"), b"#!/usr/bin/make -f\n%:\n\tdh $@\n".to_vec()),
    ]
}

/// The `.dsc` of a source package listing `files` (name, bytes) with their checksums.
pub fn dsc_for(source: &str, version: &str, format: &str, files: &[(String, Vec<u8>)]) -> String {
    use md5::Digest as _;
    let list = |pick: &dyn Fn(&[u8]) -> String| {
        files.iter().map(|(name, b)| format!("\n {} {} {name}", pick(b), b.len())).collect::<String>()
    };
    format!(
        "Format: {format}\nSource: {source}\nBinary: {source}\nArchitecture: all\nVersion: {version}\nMaintainer: Packyard <packyard@example.org>\nStandards-Version: 4.6.2\nBuild-Depends: debhelper-compat (= 13)\nPackage-List:\n {source} deb misc optional arch=all\nChecksums-Sha1:{}\nChecksums-Sha256:{}\nFiles:{}\n",
        list(&|b| hex::encode(sha1::Sha1::digest(b))),
        list(&|b| hex::encode(sha2::Sha256::digest(b))),
        list(&|b| hex::encode(md5::Md5::digest(b))),
    )
}

/// A native source package (`3.0 (native)`) that `dpkg-source -x` unpacks: its `.dsc` and its
/// `<source>_<version>.tar.xz` holding `<source>-<version>/` with `debian/` and `extra` files.
/// Returns `[(file name, bytes)]`, the `.dsc` first.
pub fn source_package(source: &str, version: &str, extra: &[(&str, &[u8])]) -> Vec<(String, Vec<u8>)> {
    let top = format!("{source}-{version}");
    let mut files = debian_dir(&top, source, version, "3.0 (native)");
    files.extend(extra.iter().map(|(p, b)| (format!("{top}/{p}"), b.to_vec())));
    let plain_version = version.split_once(':').map_or(version, |(_, v)| v);
    let tarball = (format!("{source}_{plain_version}.tar.xz"), source_tarball(&files));
    let dsc = dsc_for(source, version, "3.0 (native)", std::slice::from_ref(&tarball));
    vec![(format!("{source}_{plain_version}.dsc"), dsc.into_bytes()), tarball]
}

/// A `3.0 (quilt)` source package `<source> <upstream>-<revision>`: its `.dsc`, the
/// `<source>_<upstream>.orig.tar.xz` (the same bytes for every revision) and its
/// `<source>_<upstream>-<revision>.debian.tar.xz`. Returns `[(file name, bytes)]`, the `.dsc`
/// first.
pub fn quilt_source_package(source: &str, upstream: &str, revision: &str) -> Vec<(String, Vec<u8>)> {
    let version = format!("{upstream}-{revision}");
    let top = format!("{source}-{upstream}");
    let orig = (
        format!("{source}_{upstream}.orig.tar.xz"),
        source_tarball(&[(format!("{top}/README"), format!("{source} {upstream}\n").into_bytes())]),
    );
    let debian_files: Vec<(String, Vec<u8>)> = debian_dir("", source, &version, "3.0 (quilt)")
        .into_iter()
        .map(|(p, b)| (p.trim_start_matches('/').to_string(), b))
        .collect();
    let debian = (format!("{source}_{version}.debian.tar.xz"), source_tarball(&debian_files));
    let dsc = dsc_for(source, &version, "3.0 (quilt)", &[orig.clone(), debian.clone()]);
    vec![(format!("{source}_{version}.dsc"), dsc.into_bytes()), orig, debian]
}
