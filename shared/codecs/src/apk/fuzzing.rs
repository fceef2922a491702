//! Fuzz targets of the APK codec (see [`crate::fuzzing`]).

use crate::apk::index::check_record;
use crate::apk::package::{self as apk, ApkInfo, PkgInfo};
use crate::fuzzing::{refused, text};

/// `.apk`: [`apk::read_package`] on the bytes, and [`apk::parse_pkginfo`] on them as text.
pub fn apk(data: &[u8]) {
    match apk::read_package(data, apk::Limits { max_control: 1 << 20, max_data: 4 << 20 }) {
        Ok(info) => check_apk(&info, data.len()),
        Err(e) => refused(&e),
    }
    match apk::parse_pkginfo(&text(data)) {
        Ok(p) => check_pkginfo(&p),
        Err(e) => refused(&e),
    }
}

fn check_apk(info: &ApkInfo, len: usize) {
    check_pkginfo(&info.pkginfo);
    assert_eq!(info.size, len as u64, "the whole package is read and counted");
    assert!(info.pkginfo.datahash.is_some(), "a package without datahash was accepted");
    // `Q1` and the base64 of a SHA-1.
    assert!(info.checksum.starts_with("Q1") && info.checksum.len() == 30, "checksum {:?}", info.checksum);
    // Every line of an APKINDEX record is `<letter>:<value>`; a blank line would end the record.
    let record = apk::index_record(info, "x86_64", info.size);
    assert!(record.ends_with('\n'), "{record:?}");
    for line in record.trim_end_matches('\n').split('\n') {
        let b = line.as_bytes();
        assert!(b.len() > 2 && b[0].is_ascii_alphabetic() && b[1] == b':', "index line {line:?} in {record:?}");
    }
}

fn check_pkginfo(p: &PkgInfo) {
    let name_ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 128
            && s.as_bytes()[0].is_ascii_alphanumeric()
            && s.bytes().all(|c| c.is_ascii_alphanumeric() || b"._+-".contains(&c))
    };
    assert!(name_ok(&p.name), "pkgname {:?}", p.name);
    assert!(name_ok(&p.arch), "arch {:?}", p.arch);
    assert!(
        !p.version.is_empty()
            && p.version.len() <= 128
            && p.version.as_bytes()[0].is_ascii_digit()
            && p.version.bytes().all(|c| c.is_ascii_alphanumeric() || b"._+-~".contains(&c)),
        "pkgver {:?}",
        p.version
    );
    if let Some(h) = &p.datahash {
        assert!(h.len() == 64 && h.bytes().all(|c| c.is_ascii_hexdigit()), "datahash {h:?}");
    }
    let lists = [&p.depends, &p.provides, &p.install_if, &p.replaces];
    let single = [&p.description, &p.url, &p.license, &p.origin, &p.maintainer, &p.commit];
    assert!(
        single.into_iter().chain(lists.into_iter().flatten()).all(|v| !v.contains('\n')),
        "a .PKGINFO value spans lines: {p:?}"
    );
}

/// `.PKGINFO` as text, read by apk's syntax; the `APKINDEX` record made from an accepted one is
/// read back as apk reads an index record. Also the text as an index record, which must never
/// panic.
pub fn pkginfo(data: &[u8]) {
    let s = text(data);
    match apk::parse_pkginfo(&s) {
        Ok(p) => {
            check_pkginfo(&p);
            let info = ApkInfo { pkginfo: p, checksum: format!("Q1{}", "A".repeat(27)) + "=", signed: true, size: 1 };
            let record = apk::index_record(&info, "x86_64", 1);
            if let Err(e) = check_record(&record) {
                panic!("an accepted .PKGINFO makes an index record apk cannot read ({e}):\n{record}");
            }
        }
        Err(e) => refused(&e),
    }
    if let Err(e) = check_record(&s) {
        refused(&e);
    }
}
