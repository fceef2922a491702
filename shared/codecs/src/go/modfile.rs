//! `go.mod` as the go command reads it (golang.org/x/mod/modfile): the lexer — `//` comments,
//! quoted and raw strings, `( ) [ ] { } ,` tokens, identifiers of printable characters —,
//! directive blocks, and each directive's arguments: `module` (once, a valid module path),
//! `go` and `toolchain` (once, in their version syntax), `godebug`, `require` and `exclude`
//! (a path and a semantic version that agree on the major version), `replace` (`old [v] =>
//! new [v]`, the new side a directory or a path and version), `retract` (a version or
//! `[low, high]`), `tool` and `ignore`. A directive this reader does not know is left alone, as
//! the go command leaves it in a dependency's go.mod.

use super::version::Version;
use super::{check_module_path, path_major};

/// Why a go.mod is refused: the line and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("go.mod:{line}: {message}")]
pub struct ModError {
    pub line: usize,
    pub message: String,
}

fn at(line: usize, message: impl Into<String>) -> ModError {
    ModError { line, message: message.into() }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// An identifier or a string, as written.
    Word(String),
    Open,
    Close,
    Punct(char),
    Newline,
}

/// Go's `isIdent`: printable (`unicode.IsPrint`), not space, not one of `( ) [ ] { } ,`. The
/// invisible format characters Go does not count as printable are named here (a byte order
/// mark, zero-width and direction marks, the soft hyphen).
fn is_ident(c: char) -> bool {
    let invisible = matches!(c, '\u{feff}' | '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}');
    !matches!(c, ' ' | '(' | ')' | '[' | ']' | '{' | '}' | ',') && !c.is_whitespace() && !c.is_control() && !invisible
}

fn lex(text: &str) -> Result<Vec<(Tok, usize)>, ModError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\r' => i += 1,
            '\n' => {
                out.push((Tok::Newline, line));
                line += 1;
                i += 1;
            }
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if chars.get(i + 1) == Some(&'*') => {
                return Err(at(line, "mod files must use // comments (not /* */ comments)"));
            }
            '(' => {
                out.push((Tok::Open, line));
                i += 1;
            }
            ')' => {
                out.push((Tok::Close, line));
                i += 1;
            }
            '[' | ']' | '{' | '}' | ',' => {
                out.push((Tok::Punct(c), line));
                i += 1;
            }
            '"' | '`' => {
                let start = i;
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err(at(line, "unexpected EOF in string")),
                        Some('\n') => return Err(at(line, "unexpected newline in string")),
                        Some('\\') if c == '"' => i += 2,
                        Some(&q) if q == c => {
                            i += 1;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
                out.push((Tok::Word(chars[start..i.min(chars.len())].iter().collect()), line));
            }
            c if is_ident(c) => {
                let start = i;
                while i < chars.len() && is_ident(chars[i]) {
                    if chars[i] == '/' && chars.get(i + 1) == Some(&'/') {
                        break;
                    }
                    if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                        return Err(at(line, "mod files must use // comments (not /* */ comments)"));
                    }
                    i += 1;
                }
                out.push((Tok::Word(chars[start..i].iter().collect()), line));
            }
            other => return Err(at(line, format!("unexpected input character {other:?}"))),
        }
    }
    Ok(out)
}

/// A word's value: an interpreted string unquoted (Go's escapes), a raw string refused (as
/// modfile refuses it), an unquoted word without quote characters.
fn string(word: &str, line: usize) -> Result<String, ModError> {
    if let Some(inner) = word.strip_prefix('"').and_then(|w| w.strip_suffix('"')) {
        let mut out = String::new();
        let mut it = inner.chars();
        while let Some(c) = it.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            match it.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('\\') => out.push('\\'),
                Some('"') => out.push('"'),
                Some(other) => return Err(at(line, format!("invalid escape \\{other} in {word}"))),
                None => return Err(at(line, format!("invalid quoted string {word}"))),
            }
        }
        return Ok(out);
    }
    if word.contains(['"', '\'', '`']) {
        return Err(at(line, format!("unquoted string cannot contain quote: {word}")));
    }
    Ok(word.to_string())
}

/// `vX.Y.Z`-style version as `module.CanonicalVersion` accepts it (shorthands `v1`, `v1.2`
/// included, as the go command reads a dependency's go.mod).
fn semver(word: &str, line: usize, verb: &str) -> Result<Version, ModError> {
    Version::parse(word)
        .map_err(|e| at(line, format!("{verb}: version {word:?} invalid: {e} (must be of the form v1.2.3)")))
}

/// `require`/`exclude`: the path's major version suffix and the version agree.
fn path_and_version(path: &str, version: &str, line: usize, verb: &str) -> Result<(), ModError> {
    let v = semver(version, line, verb)?;
    let major = path_major(path).map_err(|e| at(line, format!("{verb} {path}: invalid module path: {e}")))?;
    let incompatible = v.build.as_deref() == Some("incompatible");
    match major {
        None if v.major > 1 && !incompatible => {
            Err(at(line, format!("{verb} {path} {version}: should be v0 or v1, not v{}", v.major)))
        }
        Some(suffix) if suffix.starts_with('/') && (suffix[1..] != v.major_str()) => {
            Err(at(line, format!("{verb} {path} {version}: should be {}, not v{}", &suffix[1..], v.major)))
        }
        _ => Ok(()),
    }
}

fn is_directory(path: &str) -> bool {
    path == "."
        || path == ".."
        || path.starts_with("./")
        || path.starts_with("../")
        || path.starts_with('/')
        || path.starts_with(".\\")
        || path.starts_with("..\\")
        || (path.len() >= 2 && path.as_bytes()[1] == b':' && path.as_bytes()[0].is_ascii_alphabetic())
}

const GO_VERSION: fn(&str) -> bool = |v| {
    // ^([1-9][0-9]*)\.(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))?([a-z]+[0-9]+)?$
    let number = |s: &str, zero_ok: bool| {
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" && zero_ok || !s.starts_with('0'))
    };
    let pre_at = v.find(|c: char| c.is_ascii_lowercase()).unwrap_or(v.len());
    let (nums, pre) = v.split_at(pre_at);
    let parts: Vec<&str> = nums.split('.').collect();
    let nums_ok =
        (parts.len() == 2 || parts.len() == 3) && number(parts[0], false) && parts[1..].iter().all(|p| number(p, true));
    let letters = pre.bytes().take_while(u8::is_ascii_lowercase).count();
    let pre_ok =
        pre.is_empty() || (letters > 0 && pre.len() > letters && pre[letters..].bytes().all(|b| b.is_ascii_digit()));
    nums_ok && pre_ok
};

/// What a go.mod declares that the upload checks against: its module path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModFile {
    pub module: Option<String>,
}

/// One statement: its verb's line and its argument words (brackets and commas kept).
struct Stmt {
    verb: String,
    args: Vec<Tok>,
    line: usize,
    in_block: bool,
}

/// Parses and checks a go.mod.
pub fn parse(text: &str) -> Result<ModFile, ModError> {
    let toks = lex(text)?;
    let mut lines: Vec<(Vec<Tok>, usize)> = Vec::new();
    let mut current: Vec<Tok> = Vec::new();
    let mut current_line = 1;
    for (t, line) in toks {
        if t == Tok::Newline {
            if !current.is_empty() {
                lines.push((std::mem::take(&mut current), current_line));
            }
            continue;
        }
        if current.is_empty() {
            current_line = line;
        }
        current.push(t);
    }
    if !current.is_empty() {
        lines.push((current, current_line));
    }
    // Statements, with blocks (`verb (` … `)`) unfolded into one statement per line.
    let mut stmts = Vec::new();
    let mut block: Option<(String, usize)> = None;
    for (toks, line) in lines {
        if let Some((verb, _)) = &block {
            if toks.first() == Some(&Tok::Close) {
                if toks.len() > 1 {
                    return Err(at(line, "syntax error (expected newline after closing paren)"));
                }
                block = None;
                continue;
            }
            stmts.push(Stmt { verb: verb.clone(), args: toks, line, in_block: true });
            continue;
        }
        let Some(Tok::Word(verb)) = toks.first() else {
            return Err(at(line, "syntax error (unexpected token at the start of a line)"));
        };
        let verb = verb.clone();
        match toks.as_slice() {
            [_, Tok::Open] => block = Some((verb, line)),
            [_, Tok::Open, Tok::Close] => {}
            _ if toks.last() == Some(&Tok::Open) => {
                // `require x (`: not a block the go command knows; only unknown verbs may do this.
                if KNOWN.contains(&verb.as_str()) {
                    return Err(at(line, format!("unknown block type: {verb}")));
                }
            }
            _ => stmts.push(Stmt { verb, args: toks[1..].to_vec(), line, in_block: false }),
        }
    }
    if let Some((verb, line)) = block {
        return Err(at(line, format!("syntax error (unterminated {verb} block)")));
    }
    let mut module = None;
    let mut seen_go = false;
    let mut seen_toolchain = false;
    for s in stmts {
        let words: Vec<&str> = s
            .args
            .iter()
            .filter_map(|t| match t {
                Tok::Word(w) => Some(w.as_str()),
                _ => None,
            })
            .collect();
        let only_words = words.len() == s.args.len();
        let line = s.line;
        let usage = |u: &str| at(line, format!("usage: {u}"));
        match s.verb.as_str() {
            "module" => {
                if module.is_some() {
                    return Err(at(line, "repeated module statement"));
                }
                if words.len() != 1 || !only_words {
                    return Err(usage("module module/path"));
                }
                let path = string(words[0], line)?;
                check_module_path(&path).map_err(|e| at(line, e.0))?;
                module = Some(path);
            }
            "go" => {
                if s.in_block {
                    return Err(at(line, "go directives cannot be in a block"));
                }
                if seen_go {
                    return Err(at(line, "repeated go statement"));
                }
                seen_go = true;
                if words.len() != 1 || !only_words {
                    return Err(usage("go 1.23"));
                }
                if !GO_VERSION(words[0]) {
                    return Err(at(line, format!("invalid go version '{}': must match format 1.23.0", words[0])));
                }
            }
            "toolchain" => {
                if s.in_block {
                    return Err(at(line, "toolchain directives cannot be in a block"));
                }
                if seen_toolchain {
                    return Err(at(line, "repeated toolchain statement"));
                }
                seen_toolchain = true;
                if words.len() != 1 || !only_words {
                    return Err(usage("toolchain go1.23.0"));
                }
                let t = words[0];
                if !(t == "default" || t == "go1" || t.starts_with("go1.")) {
                    return Err(at(
                        line,
                        format!("invalid toolchain version '{t}': must match format go1.23.0 or default"),
                    ));
                }
            }
            "godebug"
                if words.len() != 1
                    || !only_words
                    || words[0].contains(['"', '`', '\''])
                    || !words[0].contains('=') =>
            {
                return Err(usage("godebug key=value"));
            }
            "godebug" => {}
            "require" | "exclude" => {
                if words.len() != 2 || !only_words {
                    return Err(usage(&format!("{} module/path v1.2.3", s.verb)));
                }
                let path = string(words[0], line)?;
                let version = string(words[1], line)?;
                path_and_version(&path, &version, line, &s.verb)?;
            }
            "replace" => {
                let arrow = words.iter().position(|w| *w == "=>");
                let (Some(arrow), true) = (arrow, only_words) else {
                    return Err(usage("replace module/path [v1.2.3] => other/module v1.4\n\t or replace module/path [v1.2.3] => ../local/directory"));
                };
                let (old, new) = (&words[..arrow], &words[arrow + 1..]);
                if old.is_empty() || old.len() > 2 || new.is_empty() || new.len() > 2 {
                    return Err(usage("replace module/path [v1.2.3] => other/module v1.4\n\t or replace module/path [v1.2.3] => ../local/directory"));
                }
                string(old[0], line)?;
                if let Some(v) = old.get(1) {
                    semver(&string(v, line)?, line, "replace")?;
                }
                let target = string(new[0], line)?;
                match new.get(1) {
                    None if !is_directory(&target) => {
                        return Err(at(
                            line,
                            format!("replacement module without version must be directory path (rooted or starting with . or ..): {target}"),
                        ))
                    }
                    None => {}
                    Some(_) if is_directory(&target) => {
                        return Err(at(line, format!("replacement module directory path {target} cannot have version")))
                    }
                    Some(v) => {
                        semver(&string(v, line)?, line, "replace")?;
                    }
                }
            }
            "retract" => {
                let versions: Vec<String> = match s.args.as_slice() {
                    [Tok::Word(v)] => vec![string(v, line)?],
                    [Tok::Punct('['), Tok::Word(lo), Tok::Punct(','), Tok::Word(hi), Tok::Punct(']')] => {
                        vec![string(lo, line)?, string(hi, line)?]
                    }
                    _ => return Err(usage("retract v1.2.3 or retract [v1.2.3, v1.3.0]")),
                };
                for v in &versions {
                    semver(v, line, "retract")?;
                }
            }
            "tool" | "ignore" => {
                if words.len() != 1 || !only_words {
                    return Err(usage(&format!("{} path", s.verb)));
                }
                string(words[0], line)?;
            }
            _ => {}
        }
    }
    Ok(ModFile { module })
}

/// The verbs with arguments checked here (a block header of another shape is refused for them).
const KNOWN: [&str; 10] =
    ["module", "go", "toolchain", "godebug", "require", "exclude", "replace", "retract", "tool", "ignore"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_go_mods_parse() -> Result<(), ModError> {
        let m = parse(
            "// Deprecated: use example.com/new\nmodule example.com/hello\n\ngo 1.21\n\ntoolchain go1.22.3\n\n\
             require (\n\tgolang.org/x/mod v0.17.0 // indirect\n\tgithub.com/a/b/v2 v2.1.0\n\tgithub.com/c/d v3.0.0+incompatible\n\tgopkg.in/yaml.v3 v3.0.1\n)\n\n\
             replace example.com/old => ../old\nreplace example.com/x v1.0.0 => example.com/y v1.1.0\n\n\
             exclude example.com/bad v1.2.3\nretract [v1.0.0, v1.0.5] // broken\nretract v0.9.0\n\
             godebug default=go1.21\ntool example.com/hello/cmd/gen\nunknownverb whatever it says\n",
        )?;
        assert_eq!(m.module.as_deref(), Some("example.com/hello"));
        assert_eq!(parse("module \"example.com/q\" // x\n")?.module.as_deref(), Some("example.com/q"));
        assert_eq!(parse("")?.module, None);
        parse("module example.com/m\ngo 1.21rc1\nrequire ( )\n")?;
        parse("module example.com/m\r\ngo 1.22.0\r\n")?;
        Ok(())
    }

    #[test]
    fn what_the_go_command_refuses() {
        for (text, why) in [
            ("module example.com/m\nmodule example.com/n\n", "repeated module"),
            ("module\n", "usage: module"),
            ("module example.com/m extra\n", "usage: module"),
            ("module notadomain\n", "malformed module path"),
            ("module `example.com/m`\n", "unquoted string cannot contain quote"),
            ("module example.com/m\ngo 1.21.x\n", "invalid go version"),
            ("module example.com/m\ngo v1.21\n", "invalid go version"),
            ("module example.com/m\ngo 1\n", "invalid go version"),
            ("module example.com/m\ngo 1.21\ngo 1.22\n", "repeated go"),
            ("module example.com/m\ntoolchain 1.22\n", "invalid toolchain"),
            ("module example.com/m\nrequire example.com/x latest\n", "must be of the form v1.2.3"),
            ("module example.com/m\nrequire example.com/x\n", "usage: require"),
            ("module example.com/m\nrequire example.com/x v2.0.0\n", "should be v0 or v1"),
            ("module example.com/m\nrequire example.com/x/v3 v2.0.0\n", "should be v3"),
            ("module example.com/m\nrequire (\n\texample.com/x v1.0.0\n", "unterminated"),
            ("module example.com/m\nrequire (\n\texample.com/x v1.0.0\n) x\n", "expected newline after closing paren"),
            ("module example.com/m\nexclude example.com/x v1.0\n", ""),
            ("module example.com/m\nreplace example.com/x => example.com/y\n", "must be directory path"),
            ("module example.com/m\nreplace example.com/x => ./y v1.0.0\n", "cannot have version"),
            ("module example.com/m\nreplace example.com/x example.com/y\n", "usage: replace"),
            ("module example.com/m\nretract banana\n", "must be of the form"),
            ("module example.com/m\nretract [v1.0.0 v1.1.0]\n", "usage: retract"),
            ("module example.com/m\ngodebug nokey\n", "usage: godebug"),
            ("module example.com/m /* c */\n", "// comments"),
            ("module \"example.com/m\n", "newline in string"),
            ("\u{feff}module example.com/m\n", "unexpected input character"),
            ("module example.com/m\n\u{0}\n", "unexpected input character"),
            ("module example.com/m\nrequire x (\n", "unknown block type"),
        ] {
            let got = parse(text);
            if why.is_empty() {
                assert!(got.is_ok(), "{text:?}: {got:?}");
                continue;
            }
            let e = got.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains(why) && e.starts_with("go.mod:"), "{text:?}: {e}");
        }
    }
}
