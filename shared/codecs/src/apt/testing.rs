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
