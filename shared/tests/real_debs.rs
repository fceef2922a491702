//! The `.deb` parser against real Debian packages (downloaded by scripts/test.sh into
//! `TEST_DEBS_DIR`), compared with what `dpkg-deb` reads from the same files.

use std::process::Command;

use packyard_codecs::apt::deb::{read_package, DebError, Limits};

#[test]
fn parses_real_debian_packages_like_dpkg_deb() -> anyhow::Result<()> {
    let Ok(dir) = std::env::var("TEST_DEBS_DIR") else {
        eprintln!("skipped: TEST_DEBS_DIR is not set (scripts/test.sh sets it)");
        return Ok(());
    };
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "deb") {
            continue;
        }
        let control = read_package(std::fs::File::open(&path)?, Limits::default())
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let dpkg = Command::new("dpkg-deb").arg("-f").arg(&path).output()?;
        anyhow::ensure!(dpkg.status.success(), "dpkg-deb failed on {}", path.display());
        let expected = String::from_utf8(dpkg.stdout)?;
        assert_eq!(control.text, expected.trim_end(), "{}", path.display());
        let field = |f: &str| {
            let out =
                Command::new("dpkg-deb").arg("-f").arg(&path).arg(f).output().map(|o| o.stdout).unwrap_or_default();
            String::from_utf8_lossy(&out).trim().to_string()
        };
        assert_eq!(control.package, field("Package"));
        assert_eq!(control.version, field("Version"));
        assert_eq!(control.architecture, field("Architecture"));
        // Cut anywhere after its control member, the package is refused as truncated, as
        // `dpkg-deb -c` refuses it.
        let bytes = std::fs::read(&path)?;
        for cut in [bytes.len() / 2, bytes.len() * 3 / 4, bytes.len() - 100, bytes.len() - 1] {
            let err = read_package(&bytes[..cut], Limits::default()).err();
            assert!(
                matches!(&err, Some(DebError::Truncated(_))),
                "{} cut at {cut} of {}: {err:?}",
                path.display(),
                bytes.len()
            );
        }
        seen += 1;
    }
    assert!(seen >= 3, "expected the downloaded packages in {dir}, found {seen}");
    Ok(())
}
