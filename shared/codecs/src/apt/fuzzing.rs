//! Fuzz targets of the APT codec (see [`crate::fuzzing`]).

use crate::apt::control::{self, Control};
use crate::apt::deb;
use crate::apt::dsc::{render_sources_stanza, Dsc, SourceFile};
use crate::apt::fields::{self, Mode};
use crate::apt::packages::{render_stanza, PoolFile};
use crate::fuzzing::{refused, text};

/// `.deb`: [`deb::read_package`] on the bytes, and [`Control::parse`] on them as text.
pub fn deb(data: &[u8]) {
    let limits =
        deb::Limits { control_member: 1 << 20, control_tar: 4 << 20, control_file: 256 << 10, data_tar: 4 << 20 };
    match deb::read_package(data, limits) {
        Ok(c) => {
            assert!(c.text.len() as u64 <= limits.control_file, "a control file over the limit was read");
            check_control(&c);
        }
        Err(e) => refused(&e),
    }
    match Control::parse(&text(data)) {
        Ok(c) => check_control(&c),
        Err(e) => refused(&e),
    }
}

fn check_control(c: &Control) {
    assert!(control::valid_name(&c.package), "package {:?}", c.package);
    assert!(control::valid_name(&c.source), "source {:?}", c.source);
    assert!(control::valid_version(&c.version), "version {:?}", c.version);
    assert!(control::valid_architecture(&c.architecture), "architecture {:?}", c.architecture);
    // The text becomes a Packages stanza as it is: a blank line in it would end the stanza.
    for line in c.text.split('\n') {
        assert!(!line.trim().is_empty(), "a blank line in the accepted control text {:?}", c.text);
    }
    match Control::parse(&c.text) {
        Ok(again) => assert_eq!(
            (&again.package, &again.version, &again.architecture, &again.source),
            (&c.package, &c.version, &c.architecture, &c.source),
            "the accepted control text reads differently the second time"
        ),
        Err(e) => panic!("the accepted control text {:?} is refused when read again: {e}", c.text),
    }
    let pool = c.pool_path("main");
    assert!(pool.starts_with("pool/main/") && pool.ends_with(".deb"), "{pool}");
    assert!(pool.split('/').all(|s| !s.is_empty() && s != "." && s != ".."), "pool path {pool:?}");
}

/// A binary package's control file as text, read by policy (an upload's check), then the
/// `Packages` stanza rendered from what was accepted, read as apt reads an index: whatever an
/// upload may carry, apt can parse. Also the text read directly as a stanza by apt's grammar
/// (the check a group applies to an upstream's stanza), which must never panic.
pub fn deb_control(data: &[u8]) {
    let s = text(data);
    match Control::parse(&s) {
        Ok(c) => {
            check_control(&c);
            let mut stanza = String::new();
            let pool = c.pool_path("main");
            let file = PoolFile {
                filename: &pool,
                size: 1,
                md5: "00000000000000000000000000000000",
                sha256: "0000000000000000000000000000000000000000000000000000000000000000",
            };
            render_stanza(&mut stanza, &c.text, &file);
            if let Err((who, e)) = fields::check_index(&stanza) {
                panic!("an accepted control file makes a stanza apt cannot read ({who}: {e}):\n{stanza}");
            }
        }
        Err(e) => refused(&e),
    }
    match fields::check_stanza(&s) {
        Ok(()) => assert!(!s.trim_matches('\n').contains("\n\n"), "a stanza with a blank line inside"),
        Err(e) => refused(&e),
    }
}

/// A `.dsc` read by policy, and the `Sources` stanza rendered from an accepted one, read as
/// `apt-get source` reads an index.
pub fn dsc(data: &[u8]) {
    match Dsc::parse(data) {
        Ok(d) => {
            assert!(control::valid_name(&d.source) && control::valid_version(&d.version), "{d:?}");
            let files: Vec<SourceFile<'_>> = d
                .files
                .iter()
                .map(|f| SourceFile { name: &f.name, size: f.size, md5: &f.md5, sha1: "", sha256: &f.sha256 })
                .collect();
            let mut stanza = String::new();
            render_sources_stanza(&mut stanza, &d.text, "pool/main/x/x", &files);
            if let Err((who, e)) = fields::check_index(&stanza) {
                panic!("an accepted .dsc makes a Sources stanza apt cannot read ({who}: {e}):\n{stanza}");
            }
        }
        Err(e) => refused(&e),
    }
    if let Ok(f) = fields::paragraph(&text(data)) {
        match fields::check_source(&f, Mode::Policy) {
            Ok(()) => {
                if let Err(e) = fields::check_source(&f, Mode::Apt) {
                    panic!("policy accepts what apt's grammar refuses: {e}");
                }
            }
            Err(e) => refused(&e),
        }
    }
}
