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

/// The file's code before its tests module (`#[cfg(test)]` then `mod …`), without `//` comments
/// (a `//` after `:` is a URL's, not a comment).
fn code(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let tests_at = lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod "))
        .unwrap_or(lines.len());
    lines[..tests_at].iter().enumerate().map(|(i, l)| (i + 1, without_comment(l).to_string())).collect()
}

fn without_comment(line: &str) -> &str {
    let mut from = 0;
    while let Some(at) = line[from..].find("//").map(|i| i + from) {
        if !line[..at].ends_with(':') {
            return &line[..at];
        }
        from = at + 2;
    }
    line
}

fn ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Where `line` names `format`: its variant, its module (`apt::`, `mod apt;`), a table or item
/// of its own (`apt_packages`), a type of its own (`AptSettings`), its name as a string or in a
/// list of every format's names, its settings field.
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
    let upper = |c: Option<char>| c.is_some_and(|c| c.is_ascii_uppercase());
    let lower = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase());
    let list: Vec<&str> = Format::ALL.iter().map(|f| f.as_str()).collect();
    let hits = [
        (format!("Format::{variant}"), whole(&format!("Format::{variant}"), &not_ident)),
        (format!("{name}::"), whole(&format!("{name}::"), &any)),
        (format!("mod {name}"), whole(&format!("mod {name}"), &not_ident)),
        (format!("{name}_…"), whole(&format!("{name}_"), &lower)),
        (format!("{variant}…"), whole(&variant, &upper)),
        (format!("\"{name}\""), line.contains(&format!("\"{name}\""))),
        (format!("'{name}'"), line.contains(&format!("'{name}'"))),
        (format!("settings.{name}"), whole(&format!("settings.{name}"), &not_ident)),
        ("every format's name".to_string(), list.windows(2).any(|w| line.contains(&format!("{}, {}", w[0], w[1])))),
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

/// A line of a format's section of the configuration file (`[go]`: `GoConfig`, `config.go`),
/// which the issue lets the model keep.
fn config_section(line: &str, format: Format) -> bool {
    let name = format.as_str();
    let variant = format!("{}{}", name[..1].to_ascii_uppercase(), &name[1..]);
    line.contains(&format!("{variant}Config"))
        || line.contains(&format!("pub {name}: "))
        || line.contains(&format!(".{name}."))
        || line.contains(&format!("\"{name}."))
}

/// The line by which a crate declares a format's own folder (`pub mod apt;` in the codecs',
/// the formats' or the route tables' parent file): Rust needs one, and it says nothing else.
fn declares_own_folder(path: &str, line: &str, format: Format) -> bool {
    let parents = ["shared/codecs/src/lib.rs", "shared/formats/src/lib.rs", "api/src/formats.rs"];
    let name = format.as_str();
    parents.contains(&path) && [format!("pub mod {name};"), format!("mod {name};")].contains(&line.trim().to_string())
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
            for format in Format::REGISTERED {
                if own(path, format) {
                    continue;
                }
                let allowed_list = (LISTS.contains(&path.as_str())
                    && (path != "shared/model/src/repos.rs"
                        || line.contains("string_enum!(Format")
                        || line.contains("pub const ALL: [Format;")
                        || line.contains("pub const REGISTERED: [Format;")))
                    || (path.starts_with("shared/model/src/config") && config_section(&line, format))
                    || declares_own_folder(path, &line, format);
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
        let Some(mine) = Format::REGISTERED.into_iter().find(|f| own(path, *f)) else { continue };
        let text = std::fs::read_to_string(root.join(path))?;
        let mut in_use = false;
        for (n, line) in code(&text) {
            let trimmed = line.trim_start();
            if trimmed.starts_with("use ") || trimmed.starts_with("pub use ") {
                in_use = true;
            }
            for other in Format::REGISTERED.into_iter().filter(|f| *f != mine) {
                let o = other.as_str();
                let imports = [
                    format!("crate::{o}"),
                    format!("super::{o}"),
                    format!("super::super::{o}"),
                    format!("packyard_codecs::{o}"),
                    format!("packyard_formats::{o}"),
                ];
                let named = |needle: &str| {
                    line.match_indices(needle).any(|(i, _)| !line[i + needle.len()..].chars().next().is_some_and(ident))
                };
                let grouped =
                    in_use && line.split(|c: char| !ident(c)).any(|w| w == o) && !line.contains(&format!("\"{o}"));
                if let Some(what) = imports.iter().find(|i| named(i.as_str())) {
                    found.push(format!("{path}:{n}: {mine} uses {what}: {}", line.trim()));
                } else if grouped {
                    found.push(format!("{path}:{n}: {mine} imports {o}: {}", line.trim()));
                }
            }
            let trimmed = line.trim_start();
            if trimmed.starts_with("use ") || trimmed.starts_with("pub use ") {
                in_use = !line.contains(';');
            } else if in_use && line.contains(';') {
                in_use = false;
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
    assert_eq!(names("pub mod apt;", Format::Apt), Some("mod apt".into()));
    assert_eq!(names("let s = AptSettings::default();", Format::Apt), Some("Apt…".into()));
    assert_eq!(names("WHERE format = 'conan'", Format::Conan), Some("'conan'".into()));
    assert_eq!(names("\"one of apt, apk, go, conan\"", Format::Go), Some("every format's name".into()));
    assert_eq!(names("let gone = Gone;", Format::Go), None);
    assert_eq!(without_comment("let u = \"https://a\"; // apt::"), "let u = \"https://a\"; ");
    let text = "#[cfg(test)]\nstatic X: u8 = 0;\nfn apt_x() {}\n#[cfg(test)]\nmod tests {\n    fn apt_y() {}\n}\n";
    let kept: Vec<String> = code(text).into_iter().map(|(_, l)| l).collect();
    assert_eq!(kept, ["#[cfg(test)]", "static X: u8 = 0;", "fn apt_x() {}"]);
    assert!(config_section("    pub go: GoConfig,", Format::Go) && !config_section("let go = 1;", Format::Go));
    assert!(declares_own_folder("api/src/formats.rs", "pub mod go;", Format::Go));
    assert!(!declares_own_folder("api/src/app.rs", "pub mod go;", Format::Go));
    assert!(!declares_own_folder("api/src/formats.rs", "pub mod go { fn x() {} }", Format::Go));
}
