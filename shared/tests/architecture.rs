//! The architecture invariants that a grep can keep, kept by one (docs/ARCHITECTURE.md):
//! - outside a format's own folders, no code names a format — not its `Format` variant, its
//!   modules, its tables or its name as a string — but the registry's one list, the format enum
//!   and the API's one list of route tables;
//! - no format imports another format's code.
//!
//! Tests (`tests/`, a file's `#[cfg(test)]` part), benches, fuzz targets and the load tester
//! may name formats.

use std::path::{Path, PathBuf};

use packyard_model::repos::Format;

/// The workspace's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Every `.rs` file under `dir`, as a path relative to the root.
fn sources(root: &Path, dir: &str, out: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(root.join(dir))? {
        let entry = entry?;
        let rel = format!("{dir}/{}", entry.file_name().to_string_lossy());
        if entry.file_type()?.is_dir() {
            if !matches!(entry.file_name().to_str(), Some("tests" | "benches" | "target")) {
                sources(root, &rel, out)?;
            }
        } else if rel.ends_with(".rs") {
            out.push(rel);
        }
    }
    Ok(())
}

/// The file's code before its `#[cfg(test)]` part, without comments.
fn code(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .take_while(|l| l.trim() != "#[cfg(test)]")
        .enumerate()
        .map(|(i, l)| (i + 1, l.split("//").next().unwrap_or_default().to_string()))
        .collect()
}

fn ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Where `line` names `format`: its variant, its module (`apt::`), a table or item of its own
/// (`apt_packages`), its name as a string, its settings field.
fn names(line: &str, format: Format) -> Option<String> {
    let name = format.as_str();
    let mut variant: Vec<char> = name.chars().collect();
    variant[0] = variant[0].to_ascii_uppercase();
    let variant: String = variant.into_iter().collect();
    let whole = |needle: &str, after_ok: &dyn Fn(Option<char>) -> bool| {
        line.match_indices(needle).any(|(i, _)| {
            let before = line[..i].chars().next_back();
            let after = line[i + needle.len()..].chars().next();
            !before.is_some_and(ident) && after_ok(after)
        })
    };
    let not_ident = |c: Option<char>| !c.is_some_and(ident);
    let any = |_: Option<char>| true;
    let hits = [
        (format!("Format::{variant}"), whole(&format!("Format::{variant}"), &not_ident)),
        (format!("{name}::"), whole(&format!("{name}::"), &any)),
        (format!("{name}_…"), whole(&format!("{name}_"), &|c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase()))),
        (format!("\"{name}\""), line.contains(&format!("\"{name}\""))),
        (format!("settings.{name}"), whole(&format!("settings.{name}"), &not_ident)),
    ];
    hits.into_iter().find(|(_, hit)| *hit).map(|(what, _)| what)
}

/// A format's own folders: its engine slice, its route table, its codec.
fn own(path: &str, format: Format) -> bool {
    let f = format.as_str();
    ["shared/formats/src", "api/src/formats", "shared/codecs/src"]
        .iter()
        .any(|dir| path == format!("{dir}/{f}.rs") || path.starts_with(&format!("{dir}/{f}/")))
}

/// The allowed lists: the registry, the format enum, the route tables.
const LISTS: [&str; 3] = ["shared/formats/src/lib.rs", "shared/model/src/repos.rs", "api/src/formats/tables.rs"];

fn all_sources() -> std::io::Result<(PathBuf, Vec<String>)> {
    let root = root();
    let mut files = Vec::new();
    for dir in [
        "shared/model/src",
        "shared/codecs/src",
        "shared/store/src",
        "shared/core/src",
        "shared/formats/src",
        "shared/src",
        "api/src",
        "worker/src",
    ] {
        sources(&root, dir, &mut files)?;
    }
    files.sort();
    Ok((root, files))
}

#[test]
fn generic_code_names_no_format() -> anyhow::Result<()> {
    let (root, files) = all_sources()?;
    assert!(files.len() > 100, "the sources were not found under {}: {files:?}", root.display());
    let mut found = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(root.join(path))?;
        for (n, line) in code(&text) {
            for format in Format::ALL {
                if own(path, format) {
                    continue;
                }
                let allowed_list = LISTS.contains(&path.as_str())
                    && (path != "shared/model/src/repos.rs"
                        || line.contains("string_enum!(Format")
                        || line.contains("pub const ALL: [Format;"));
                if let (Some(what), false) = (names(&line, format), allowed_list) {
                    found.push(format!("{path}:{n}: {what}: {}", line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "generic code names a format:\n{}", found.join("\n"));
    Ok(())
}

#[test]
fn no_format_imports_another() -> anyhow::Result<()> {
    let (root, files) = all_sources()?;
    let mut found = Vec::new();
    for path in &files {
        let Some(mine) = Format::ALL.into_iter().find(|f| own(path, *f)) else { continue };
        let text = std::fs::read_to_string(root.join(path))?;
        for (n, line) in code(&text) {
            for other in Format::ALL.into_iter().filter(|f| *f != mine) {
                let o = other.as_str();
                let imports = [
                    format!("crate::{o}::"),
                    format!("super::{o}::"),
                    format!("super::super::{o}"),
                    format!("packyard_codecs::{o}::"),
                    format!("packyard_formats::{o}::"),
                ];
                if let Some(what) = imports.iter().find(|i| line.contains(i.as_str())) {
                    found.push(format!("{path}:{n}: {mine} uses {what}: {}", line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "a format imports another's code:\n{}", found.join("\n"));
    Ok(())
}

/// The checks can fail: a line of generic code that names a format is found.
#[test]
fn the_checks_find_what_they_look_for() {
    assert_eq!(names("if repo.format == Format::Apt {", Format::Apt), Some("Format::Apt".into()));
    assert_eq!(names("use packyard_formats::apk::settings;", Format::Apk), Some("apk::".into()));
    assert_eq!(names("SELECT x FROM go_versions", Format::Go), Some("go_…".into()));
    assert_eq!(names("if f.format == \"conan\" {", Format::Conan), Some("\"conan\"".into()));
    assert_eq!(names("let a = repo.settings.apt;", Format::Apt), Some("settings.apt".into()));
    assert_eq!(names("let gopher = ago_x; // go", Format::Go), None);
    assert_eq!(names("Format::Apkx", Format::Apk), None);
    assert!(own("shared/formats/src/apt/spec.rs", Format::Apt) && !own("shared/formats/src/apt.rsx", Format::Apt));
}
