//! Writing module zips in tests (feature `testing`), including malformed ones: a file can be a
//! symbolic link or declare a size other than its own.

use std::io::Write as _;

/// One file of a module zip, by its path below `<module>@<version>/`.
#[derive(Debug, Clone)]
pub struct ZipFile {
    pub name: String,
    pub content: Vec<u8>,
    pub symlink: bool,
    /// The size written in the headers, when it should lie.
    pub declared_size: Option<u32>,
    pub deflate: bool,
}

impl ZipFile {
    pub fn new(name: &str, content: &[u8]) -> Self {
        Self { name: name.into(), content: content.to_vec(), symlink: false, declared_size: None, deflate: true }
    }
}

fn u16le(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn u32le(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A zip whose entries are `<module>@<version>/<name>`.
pub fn module_zip(module: &str, version: &str, files: &[ZipFile]) -> anyhow::Result<Vec<u8>> {
    let named: Vec<ZipFile> =
        files.iter().map(|f| ZipFile { name: format!("{module}@{version}/{}", f.name), ..f.clone() }).collect();
    raw_zip(&named)
}

/// A zip of exactly these entries.
pub fn raw_zip(files: &[ZipFile]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for f in files {
        let mut crc = flate2::Crc::new();
        crc.update(&f.content);
        let (method, data) = if f.deflate && !f.symlink {
            let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(&f.content)?;
            (8u16, e.finish()?)
        } else {
            (0u16, f.content.clone())
        };
        let size = f.declared_size.unwrap_or(u32::try_from(f.content.len())?);
        let offset = u32::try_from(out.len())?;
        let name = f.name.as_bytes();
        // Local header.
        u32le(&mut out, 0x0403_4b50);
        u16le(&mut out, 20);
        u16le(&mut out, 0x0800); // UTF-8 names
        u16le(&mut out, method);
        u16le(&mut out, 0);
        u16le(&mut out, 0x21);
        u32le(&mut out, crc.sum());
        u32le(&mut out, u32::try_from(data.len())?);
        u32le(&mut out, size);
        u16le(&mut out, u16::try_from(name.len())?);
        u16le(&mut out, 0);
        out.extend_from_slice(name);
        out.extend_from_slice(&data);
        // Central directory entry: made by Unix, so the mode is in the external attributes.
        let mode: u32 = if f.symlink { 0o120777 } else { 0o100644 };
        u32le(&mut central, 0x0201_4b50);
        u16le(&mut central, (3 << 8) | 20);
        u16le(&mut central, 20);
        u16le(&mut central, 0x0800);
        u16le(&mut central, method);
        u16le(&mut central, 0);
        u16le(&mut central, 0x21);
        u32le(&mut central, crc.sum());
        u32le(&mut central, u32::try_from(data.len())?);
        u32le(&mut central, size);
        u16le(&mut central, u16::try_from(name.len())?);
        u16le(&mut central, 0);
        u16le(&mut central, 0);
        u16le(&mut central, 0);
        u16le(&mut central, 0);
        u32le(&mut central, mode << 16);
        u32le(&mut central, offset);
        central.extend_from_slice(name);
    }
    let cd_offset = u32::try_from(out.len())?;
    out.extend_from_slice(&central);
    u32le(&mut out, 0x0605_4b50);
    u16le(&mut out, 0);
    u16le(&mut out, 0);
    u16le(&mut out, u16::try_from(files.len())?);
    u16le(&mut out, u16::try_from(files.len())?);
    u32le(&mut out, u32::try_from(central.len())?);
    u32le(&mut out, cd_offset);
    u16le(&mut out, 0);
    Ok(out)
}

/// A module with a go.mod, a package of `files` and a payload file of `payload` bytes.
pub fn simple_module(module: &str, version: &str, message: &str, payload: usize) -> anyhow::Result<Vec<u8>> {
    let pkg =
        module.rsplit('/').find(|e| !(e.starts_with('v') && e[1..].bytes().all(|b| b.is_ascii_digit()))).unwrap_or("m");
    let pkg: String = pkg.chars().filter(char::is_ascii_alphanumeric).collect::<String>().to_lowercase();
    let mut files = vec![
        ZipFile::new("go.mod", format!("module {module}\n\ngo 1.19\n").as_bytes()),
        ZipFile::new(
            &format!("{pkg}.go"),
            format!("package {pkg}\n\n// Message says which version this is.\nfunc Message() string {{ return {message:?} }}\n")
                .as_bytes(),
        ),
    ];
    if payload > 0 {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let bytes: Vec<u8> = (0..payload)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        files.push(ZipFile { deflate: false, ..ZipFile::new("testdata/payload.bin", &bytes) });
    }
    module_zip(module, version, &files)
}
