//! Go for the runner: deterministic module zips (stored entries: `go.mod` and a payload file),
//! distinct per module and version.

fn u16le(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn u32le(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A module zip holding `go.mod` and `payload.bin` (stored, not deflated: the payload is
/// incompressible filler).
pub fn module_zip(module: &str, version: &str, payload: &[u8]) -> anyhow::Result<Vec<u8>> {
    let go_mod = format!("module {module}\n\ngo 1.19\n");
    let files: [(&str, &[u8]); 2] = [("go.mod", go_mod.as_bytes()), ("payload.bin", payload)];
    let mut out = Vec::with_capacity(payload.len() + 1024);
    let mut central = Vec::new();
    for (name, data) in files {
        let name = format!("{module}@{version}/{name}");
        let mut crc = flate2::Crc::new();
        crc.update(data);
        let (offset, size, name_len) =
            (u32::try_from(out.len())?, u32::try_from(data.len())?, u16::try_from(name.len())?);
        for (buf, central_entry) in [(&mut out, false), (&mut central, true)] {
            u32le(buf, if central_entry { 0x0201_4b50 } else { 0x0403_4b50 });
            if central_entry {
                u16le(buf, (3 << 8) | 20);
            }
            for v in [20, 0x0800, 0, 0, 0x21] {
                u16le(buf, v);
            }
            for v in [crc.sum(), size, size] {
                u32le(buf, v);
            }
            u16le(buf, name_len);
            u16le(buf, 0);
            if central_entry {
                for v in [0, 0, 0] {
                    u16le(buf, v);
                }
                u32le(buf, 0o100644 << 16);
                u32le(buf, offset);
            }
            buf.extend_from_slice(name.as_bytes());
        }
        out.extend_from_slice(data);
    }
    let cd_offset = u32::try_from(out.len())?;
    out.extend_from_slice(&central);
    u32le(&mut out, 0x0605_4b50);
    for v in [0, 0, 2, 2] {
        u16le(&mut out, v);
    }
    u32le(&mut out, u32::try_from(central.len())?);
    u32le(&mut out, cd_offset);
    u16le(&mut out, 0);
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn zips_are_deterministic_and_end_with_their_directory() -> anyhow::Result<()> {
        let a = super::module_zip("example.com/x", "v1.0.0", b"payload")?;
        assert_eq!(a, super::module_zip("example.com/x", "v1.0.0", b"payload")?);
        assert_eq!(&a[..4], b"PK\x03\x04");
        assert_eq!(&a[a.len() - 22..a.len() - 18], b"PK\x05\x06");
        Ok(())
    }
}
