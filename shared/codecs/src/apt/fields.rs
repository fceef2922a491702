//! The grammar of a Debian control paragraph (deb822) and of the fields apt and dpkg parse, so
//! that nothing is published that a client cannot read.
//!
//! Two readings:
//! - [`Mode::Policy`], for what is uploaded: Debian policy §5–7 and dpkg's parser — the stanza
//!   syntax, every relationship field (`Depends` … `Static-Built-Using`), `Multi-Arch`,
//!   `Priority`, `Section`, `Maintainer`, `Installed-Size`, the yes/no fields and the
//!   `Description`; and for a `.dsc` its own fields (`Binary`, `Architecture`, `Build-Depends*`,
//!   `Package-List`, …).
//! - [`Mode::Apt`], for what is about to be published and for stanzas from upstream: only what
//!   makes `apt-get update` (apt 2.6–3.1) fail — a relationship field apt's parser refuses, an
//!   empty `Provides`, a `Description-md5` that is not 32 hex digits, a stanza without `Package`.
//!   Debian's own archive passes it; a package that merely breaks a policy rule does too.

/// A field of a paragraph: its name as written, its value (continuation lines kept, joined by
/// `\n`, the first line trimmed), and the line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field<'a> {
    pub name: &'a str,
    pub value: String,
    pub line: usize,
    /// Continuation lines follow the first.
    pub multiline: bool,
}

impl Field<'_> {
    fn is(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name)
    }

    /// The value as one line: continuation lines folded into spaces.
    fn folded(&self) -> String {
        self.value.split('\n').map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
    }
}

/// Why a paragraph or one of its fields is refused: the field (or line) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    #[error("malformed line {0}: expected `Field: value` or an indented continuation")]
    Syntax(usize),
    #[error("line {0} is blank or only white space, which would end the stanza: write an empty line of a multi-line value as \" .\"")]
    Blank(usize),
    #[error("line {line}: the field name {name:?} is not allowed (printable ASCII without ':' or spaces, not starting with '#' or '-')")]
    Name { line: usize, name: String },
    #[error("line {0} holds a control character (only a tab is allowed in a value)")]
    Control(usize),
    #[error("the field {0} appears twice")]
    Duplicate(String),
    #[error("the field {field} is invalid: {why}")]
    Invalid { field: String, why: String },
}

fn invalid(field: &Field<'_>, why: impl Into<String>) -> FieldError {
    FieldError::Invalid { field: field.name.to_string(), why: why.into() }
}

/// Which rules a paragraph is read by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Debian policy and dpkg: what an upload must be.
    Policy,
    /// apt's own parser: what an index must be for `apt-get update` to read it.
    Apt,
}

/// The fields of one paragraph, in order: `Field: value` lines and their indented
/// continuations. Refused: a blank or white-space-only line (it would end the stanza), a
/// continuation before any field, a field name outside deb822's set, a control character, a
/// field given twice. A trailing newline is fine; a `\r\n` ending is read as `\n`.
pub fn paragraph(text: &str) -> Result<Vec<Field<'_>>, FieldError> {
    paragraph_with(text, true)
}

/// A paragraph as apt's tag-file scanner reads one (the `Mode::Apt` readings): a line that
/// starts with white space continues the field before it (a white-space-only line too: apt ends
/// a stanza only at an empty line), a field given twice is the later one, control characters are
/// data. Still refused: a continuation before any field and a line without a `:` (apt would read
/// the lines after it into a field's name).
pub fn apt_paragraph(text: &str) -> Result<Vec<Field<'_>>, FieldError> {
    paragraph_with(text, false)
}

fn paragraph_with(text: &str, strict: bool) -> Result<Vec<Field<'_>>, FieldError> {
    let text = text.trim_end_matches('\n');
    let mut fields: Vec<Field<'_>> = Vec::new();
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let n = i + 1;
        if strict && line.trim().is_empty() {
            return Err(FieldError::Blank(n));
        }
        if strict && line.chars().any(|c| (c.is_control() && c != '\t') || c == '\u{7f}') {
            return Err(FieldError::Control(n));
        }
        if !strict && line.is_empty() {
            return Err(FieldError::Blank(n));
        }
        if line.starts_with([' ', '\t']) {
            let Some(last) = fields.last_mut() else { return Err(FieldError::Syntax(n)) };
            last.value.push('\n');
            last.value.push_str(line);
            last.multiline = true;
            continue;
        }
        let Some((name, value)) = line.split_once(':') else { return Err(FieldError::Syntax(n)) };
        let name_ok = !name.is_empty()
            && (!strict
                || name.bytes().all(|b| b.is_ascii_graphic()) && !name.starts_with('#') && !name.starts_with('-'));
        if !name_ok {
            return Err(FieldError::Name { line: n, name: name.chars().take(80).collect() });
        }
        if let Some(at) = fields.iter().position(|f| f.name.eq_ignore_ascii_case(name)) {
            if strict {
                return Err(FieldError::Duplicate(name.to_string()));
            }
            fields.remove(at);
        }
        fields.push(Field { name, value: value.trim().to_string(), line: n, multiline: false });
    }
    Ok(fields)
}

/// The value of `name` in `fields`, if present.
pub fn get<'f>(fields: &'f [Field<'_>], name: &str) -> Option<&'f Field<'f>> {
    fields.iter().find(|f| f.is(name))
}

// --- relationship fields ------------------------------------------------------------------------

/// What a relationship field may hold.
#[derive(Debug, Clone, Copy)]
struct Rules {
    /// `a | b`.
    alternatives: bool,
    /// Only `(= version)`.
    equal_only: bool,
    /// Every entry carries `(= version)` (Built-Using).
    version_required: bool,
    /// `name:any`, `name:<arch>` (and, in build relations, `name:native`).
    arch_qualifier: bool,
    /// A source package's build relations: `[arch …]` and `<profile …>` lists, `:native`.
    build: bool,
}

const DEPENDS: Rules =
    Rules { alternatives: true, equal_only: false, version_required: false, arch_qualifier: true, build: false };
const CONFLICTS: Rules = Rules { alternatives: false, ..DEPENDS };
const PROVIDES: Rules = Rules { alternatives: false, equal_only: true, ..DEPENDS };
const BUILT_USING: Rules =
    Rules { alternatives: false, equal_only: true, version_required: true, arch_qualifier: false, build: false };
const BUILD_DEPENDS: Rules = Rules { build: true, ..DEPENDS };
const BUILD_CONFLICTS: Rules = Rules { alternatives: false, ..BUILD_DEPENDS };

/// A binary package's relationship fields and their rules (policy §7.1–7.8).
const BINARY_RELATIONS: [(&str, Rules); 11] = [
    ("Depends", DEPENDS),
    ("Pre-Depends", DEPENDS),
    ("Recommends", DEPENDS),
    ("Suggests", DEPENDS),
    ("Enhances", DEPENDS),
    ("Breaks", CONFLICTS),
    ("Conflicts", CONFLICTS),
    ("Replaces", CONFLICTS),
    ("Provides", PROVIDES),
    ("Built-Using", BUILT_USING),
    ("Static-Built-Using", BUILT_USING),
];

/// A source package's build relationship fields (policy §7.7).
const SOURCE_RELATIONS: [(&str, Rules); 6] = [
    ("Build-Depends", BUILD_DEPENDS),
    ("Build-Depends-Arch", BUILD_DEPENDS),
    ("Build-Depends-Indep", BUILD_DEPENDS),
    ("Build-Conflicts", BUILD_CONFLICTS),
    ("Build-Conflicts-Arch", BUILD_CONFLICTS),
    ("Build-Conflicts-Indep", BUILD_CONFLICTS),
];

/// The fields apt's list parser reads as relations in `Packages` (Built-Using is not one).
const APT_RELATIONS: [&str; 9] =
    ["Depends", "Pre-Depends", "Recommends", "Suggests", "Enhances", "Breaks", "Conflicts", "Replaces", "Provides"];

fn is_arch_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn is_profile_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b".+_-".contains(&b))
}

/// Splits `s` at the first of `stops` (or white space); the part before and the rest.
fn take_until(s: &str, stops: &[char]) -> (String, String) {
    let at = s.find(|c: char| c.is_whitespace() || stops.contains(&c)).unwrap_or(s.len());
    (s[..at].to_string(), s[at..].to_string())
}

/// One relation in policy's grammar: `name[:arch] [(op version)] [[arch …]] [<profile …>]…`.
fn policy_relation(alt: &str, rules: Rules, at_field_end: bool) -> Result<(), String> {
    let (name, rest) = take_until(alt, &[':', '(', '[', '<', ')', ']', '>']);
    if !valid_name(&name) {
        return Err(format!(
            "{alt:?}: {name:?} is not a package name (lowercase letters, digits, '+', '-' and '.', at least two, starting with a letter or digit)"
        ));
    }
    let mut rest = rest;
    if let Some(q) = rest.strip_prefix(':') {
        let (arch, after) = take_until(q, &['(', '[', '<', ')', ']', '>']);
        if !rules.arch_qualifier {
            return Err(format!("{alt:?}: an architecture qualifier (:{arch}) is not allowed in this field"));
        }
        if arch == "native" && !rules.build {
            return Err(format!("{alt:?}: :native belongs in a source package's build relations only"));
        }
        if !is_arch_name(&arch) {
            return Err(format!("{alt:?}: {arch:?} is not an architecture (write :any or an architecture name)"));
        }
        rest = after;
    }
    let mut rest = rest.trim_start().to_string();
    if let Some(inner) = rest.strip_prefix('(') {
        let Some(close) = inner.find(')') else { return Err(format!("{alt:?}: the version relation has no ')'")) };
        let relation = inner[..close].trim();
        let after = inner[close + 1..].to_string();
        let op_len = relation.bytes().take_while(|b| b"<>=".contains(b)).count();
        let (op, version) = relation.split_at(op_len);
        let version = version.trim();
        match op {
            "<<" | "<=" | "=" | ">=" | ">>" => {}
            "<" | ">" => {
                return Err(format!("{alt:?}: the operator {op:?} is obsolete and ambiguous: write {op}= or {op}{op}"))
            }
            "" => return Err(format!("{alt:?}: the version relation has no operator (<<, <=, =, >= or >>)")),
            other => return Err(format!("{alt:?}: {other:?} is not an operator (<<, <=, =, >= or >>)")),
        }
        if rules.equal_only && op != "=" {
            return Err(format!("{alt:?}: only an exact version (= version) is allowed in this field"));
        }
        if version.is_empty() {
            return Err(format!("{alt:?}: no version after {op:?}"));
        }
        if version.contains(char::is_whitespace) || !valid_version(version) {
            return Err(format!(
                "{alt:?}: {version:?} is not a Debian version ([epoch:]upstream[-revision], upstream starting with a digit)"
            ));
        }
        if at_field_end && after.trim().is_empty() && inner.trim_start().len() < 4 {
            return Err(format!(
                "{alt:?}: write the relation with a space, as (= 1): apt 2.6 and 2.8 cannot read one this short at the end of a field"
            ));
        }
        rest = after.trim_start().to_string();
    } else if rules.version_required {
        return Err(format!("{alt:?}: an exact version is required: {name} (= version)"));
    }
    if let Some(inner) = rest.strip_prefix('[') {
        if !rules.build {
            return Err(format!(
                "{alt:?}: an architecture restriction [...] belongs in a source package's build relations only"
            ));
        }
        let Some(close) = inner.find(']') else { return Err(format!("{alt:?}: the architecture list has no ']'")) };
        let terms: Vec<&str> = inner[..close].split_whitespace().collect();
        if terms.is_empty() {
            return Err(format!("{alt:?}: an empty architecture list []"));
        }
        for t in &terms {
            if !is_arch_name(t.strip_prefix('!').unwrap_or(t)) {
                return Err(format!("{alt:?}: {t:?} is not an architecture in the restriction list"));
            }
        }
        let negated = terms.iter().filter(|t| t.starts_with('!')).count();
        if negated != 0 && negated != terms.len() {
            return Err(format!("{alt:?}: an architecture list is either all negated (!) or none"));
        }
        rest = inner[close + 1..].trim_start().to_string();
    }
    while let Some(inner) = rest.strip_prefix('<') {
        if !rules.build {
            return Err(format!("{alt:?}: a build profile <...> belongs in a source package's build relations only"));
        }
        let Some(close) = inner.find('>') else { return Err(format!("{alt:?}: the build profile list has no '>'")) };
        let terms: Vec<&str> = inner[..close].split_whitespace().collect();
        if terms.is_empty() {
            return Err(format!("{alt:?}: an empty build profile list <>"));
        }
        if let Some(t) = terms.iter().find(|t| !is_profile_name(t.strip_prefix('!').unwrap_or(t))) {
            return Err(format!("{alt:?}: {t:?} is not a build profile name"));
        }
        rest = inner[close + 1..].trim_start().to_string();
    }
    if !rest.is_empty() {
        return Err(format!("{alt:?}: unexpected {:?} after the relation", rest.chars().take(40).collect::<String>()));
    }
    Ok(())
}

/// One relation as apt's `debListParser::ParseDepends` reads it: a name of anything but white
/// space and `(),|[]<>`, an optional `(op version)` with a non-empty version, and — in a build
/// relation only — `[…]` and `<…>` lists; then the end, `,` or `|`. `left`: how many bytes of
/// the whole field follow the `(` and its spaces (apt before 2.9.2 wants at least four).
fn apt_relation(alt: &str, build: bool, left: Option<usize>) -> Result<(), String> {
    let (name, rest) = take_until(alt, &['(', ')', ',', '|', '[', ']', '<', '>']);
    if name.is_empty() {
        return Err(format!("{alt:?}: no package name"));
    }
    let mut rest = rest.trim_start().to_string();
    if let Some(inner) = rest.strip_prefix('(') {
        if left.is_some_and(|n| n < 4) {
            return Err(format!("{alt:?}: the version relation is too short for apt (write it as (= 1))"));
        }
        let Some(close) = inner.find(')') else { return Err(format!("{alt:?}: the version relation has no ')'")) };
        let relation = inner[..close].trim();
        let op_len = relation.bytes().take_while(|b| b"<>=!".contains(b)).count();
        if relation[op_len..].trim().is_empty() {
            return Err(format!("{alt:?}: no version in the relation"));
        }
        rest = inner[close + 1..].trim_start().to_string();
    }
    if build {
        if let Some(inner) = rest.strip_prefix('[') {
            let Some(close) = inner.find(']') else { return Err(format!("{alt:?}: the architecture list has no ']'")) };
            if inner[..close].trim().is_empty() {
                return Err(format!("{alt:?}: an empty architecture list"));
            }
            rest = inner[close + 1..].trim_start().to_string();
        }
        while let Some(inner) = rest.strip_prefix('<') {
            let Some(close) = inner.find('>') else { return Err(format!("{alt:?}: the profile list has no '>'")) };
            rest = inner[close + 1..].trim_start().to_string();
        }
    }
    if !rest.is_empty() {
        return Err(format!(
            "{alt:?}: apt cannot read {:?} after the relation",
            rest.chars().take(40).collect::<String>()
        ));
    }
    Ok(())
}

/// A relationship field's value, entry by entry.
fn relations(field: &Field<'_>, rules: Rules, mode: Mode) -> Result<(), FieldError> {
    let value = field.folded();
    if value.is_empty() {
        // apt before 2.9.3 cannot read an empty Provides; policy wants no empty field at all.
        return if mode == Mode::Policy || field.is("Provides") {
            Err(invalid(field, "it is empty (leave the field out instead)"))
        } else {
            Ok(())
        };
    }
    let entries: Vec<&str> = value.split(',').collect();
    let last_entry = entries.len() - 1;
    let mut offset = 0;
    for (i, entry) in entries.iter().enumerate() {
        let entry_start = offset;
        offset += entry.len() + 1;
        if entry.trim().is_empty() {
            // apt takes a trailing comma; dpkg and policy take none, and apt no leading or double one.
            if mode == Mode::Apt && i == last_entry && i > 0 {
                continue;
            }
            return Err(invalid(field, "an empty entry (a comma with nothing before or after it)"));
        }
        let alts: Vec<&str> = entry.split('|').collect();
        if alts.len() > 1 && mode == Mode::Policy && !rules.alternatives {
            return Err(invalid(field, format!("{:?}: alternatives (|) are not allowed in this field", entry.trim())));
        }
        let last_alt = alts.len() - 1;
        let mut alt_offset = entry_start;
        for (j, alt) in alts.iter().enumerate() {
            let alt_start = alt_offset;
            alt_offset += alt.len() + 1;
            if alt.trim().is_empty() {
                if mode == Mode::Apt && j == last_alt && j > 0 {
                    continue;
                }
                return Err(invalid(field, format!("{:?}: an empty alternative around '|'", entry.trim())));
            }
            let at_end = i == last_entry && j == last_alt;
            let checked = match mode {
                Mode::Policy => policy_relation(alt.trim(), rules, at_end),
                Mode::Apt => {
                    // Bytes of the whole field after this `(` and the spaces that follow it.
                    let left = alt.find('(').map(|p| value[(alt_start + p + 1).min(value.len())..].trim_start().len());
                    apt_relation(alt.trim(), rules.build, left)
                }
            };
            checked.map_err(|why| invalid(field, why))?;
        }
    }
    Ok(())
}

// --- the other fields ---------------------------------------------------------------------------

/// `Name <address>` (policy §5.6.2), the name optional and the local part too: fpm, which many
/// CI pipelines build packages with, writes `<user@host>` (and `<@host>` without `USER`), and
/// dpkg and apt read them. A trailing comma is let through: a dozen of Debian's own packages
/// carry one.
fn is_address(s: &str) -> bool {
    let s = s.strip_suffix(',').unwrap_or(s);
    let (name, rest) = match s.rsplit_once('<') {
        Some((name, rest)) => (name, rest),
        None => return false,
    };
    let Some(addr) = rest.strip_suffix('>') else { return false };
    let Some((local, domain)) = addr.split_once('@') else { return false };
    let part_ok = |p: &str| !p.contains(|c: char| c.is_whitespace() || "<>@\"".contains(c));
    (name.is_empty() || name.ends_with(' '))
        && !name.contains('>')
        && part_ok(local)
        && part_ok(domain)
        && !domain.is_empty()
}

fn single_line(field: &Field<'_>) -> Result<(), FieldError> {
    if field.multiline {
        return Err(invalid(field, "it must be one line"));
    }
    Ok(())
}

fn yes_no(field: &Field<'_>) -> Result<(), FieldError> {
    single_line(field)?;
    if field.value.eq_ignore_ascii_case("yes") || field.value.eq_ignore_ascii_case("no") {
        Ok(())
    } else {
        Err(invalid(field, format!("{:?} is not yes or no", field.value)))
    }
}

fn description(field: &Field<'_>) -> Result<(), FieldError> {
    let mut lines = field.value.split('\n');
    let synopsis = lines.next().unwrap_or_default();
    if synopsis.trim().is_empty() {
        return Err(invalid(field, "the first line (the synopsis) is empty"));
    }
    for line in lines {
        if !line.starts_with([' ', '\t']) {
            return Err(invalid(field, format!("the line {line:?} does not start with a space")));
        }
        if line.strip_prefix(" .").is_some_and(|after| !after.trim().is_empty()) {
            return Err(invalid(
                field,
                format!(
                    "the line {line:?}: \" .\" followed by more is reserved (write \" .\" alone for an empty line)"
                ),
            ));
        }
    }
    Ok(())
}

/// `[area/]section`: letters, digits and `+._-`.
fn is_section(s: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && p.as_bytes()[0].is_ascii_alphanumeric()
            && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"+._-".contains(&b))
    };
    match s.split_once('/') {
        Some((area, section)) => part(area) && part(section),
        None => part(s),
    }
}

const PRIORITIES: [&str; 5] = ["required", "important", "standard", "optional", "extra"];

/// The checks shared by a binary package's control file and a `.dsc`, for the fields both may
/// carry.
fn common_field(f: &Field<'_>) -> Result<bool, FieldError> {
    match f.name.to_ascii_lowercase().as_str() {
        "maintainer" => {
            single_line(f)?;
            // One address, as policy has it — or, as a few of Debian's own packages have it,
            // several separated by commas.
            let addresses = f.value.strip_suffix(',').unwrap_or(&f.value);
            if !is_address(&f.value)
                && !addresses.split(">,").all(|a| is_address(&format!("{}>", a.trim().trim_end_matches('>'))))
            {
                return Err(invalid(f, format!("{:?} is not `Name <address@domain>`", f.value)));
            }
        }
        "priority" => {
            single_line(f)?;
            if !PRIORITIES.iter().any(|p| p.eq_ignore_ascii_case(&f.value)) {
                return Err(invalid(f, format!("{:?} is not one of {}", f.value, PRIORITIES.join(", "))));
            }
        }
        "section" => {
            single_line(f)?;
            if !is_section(&f.value) {
                return Err(invalid(f, format!("{:?} is not a section such as `utils` or `contrib/net`", f.value)));
            }
        }
        "homepage" | "vcs-browser" | "standards-version" | "description-md5" => {
            single_line(f)?;
            if f.value.contains(char::is_whitespace) {
                return Err(invalid(f, "it must be one word"));
            }
            if f.is("Description-md5") && (f.value.len() != 32 || !f.value.bytes().all(|b| b.is_ascii_hexdigit())) {
                return Err(invalid(f, "it is not an MD5 in 32 hex digits"));
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// A binary package's control file, by policy: every field dpkg and apt read.
pub fn check_binary(fields: &[Field<'_>], mode: Mode) -> Result<(), FieldError> {
    if mode == Mode::Apt {
        return check_packages_stanza(fields);
    }
    let architecture = get(fields, "Architecture").map(|f| f.value.clone()).unwrap_or_default();
    for f in fields {
        if let Some((_, rules)) = BINARY_RELATIONS.iter().find(|(n, _)| f.is(n)) {
            relations(f, *rules, mode)?;
            continue;
        }
        if common_field(f)? {
            continue;
        }
        match f.name.to_ascii_lowercase().as_str() {
            "package" | "version" | "architecture" => single_line(f)?,
            "source" => {
                single_line(f)?;
                let (name, rest) = f.value.split_once(' ').map_or((f.value.as_str(), ""), |(n, r)| (n, r));
                if !valid_name(name) {
                    return Err(invalid(f, format!("{name:?} is not a source package name")));
                }
                if !rest.is_empty() {
                    let version = rest.strip_prefix('(').and_then(|r| r.strip_suffix(')'));
                    if !version.is_some_and(valid_version) {
                        return Err(invalid(f, format!("{:?} is not `name` or `name (version)`", f.value)));
                    }
                }
            }
            "multi-arch" => {
                single_line(f)?;
                match f.value.to_ascii_lowercase().as_str() {
                    "no" | "foreign" | "allowed" => {}
                    "same" if architecture == "all" => {
                        return Err(invalid(f, "Multi-Arch: same is not allowed for Architecture: all"))
                    }
                    "same" => {}
                    _ => return Err(invalid(f, format!("{:?} is not no, same, foreign or allowed", f.value))),
                }
            }
            "installed-size" => {
                single_line(f)?;
                if f.value.is_empty() || f.value.len() > 18 || !f.value.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(invalid(f, format!("{:?} is not a size in KiB (digits only)", f.value)));
                }
            }
            "essential" | "protected" | "build-essential" | "important" => yes_no(f)?,
            "description" => description(f)?,
            _ => {}
        }
    }
    Ok(())
}

/// A `Packages` stanza as apt reads it (see [`Mode::Apt`]).
fn check_packages_stanza(fields: &[Field<'_>]) -> Result<(), FieldError> {
    for required in ["Package", "Version", "Architecture"] {
        if get(fields, required).is_none_or(|f| f.value.trim().is_empty()) {
            return Err(FieldError::Invalid { field: required.into(), why: "it is missing".into() });
        }
    }
    for f in fields {
        if APT_RELATIONS.iter().any(|n| f.is(n)) {
            relations(f, DEPENDS, Mode::Apt)?;
        } else if f.is("Description-md5") && (f.value.len() != 32 || !f.value.bytes().all(|b| b.is_ascii_hexdigit())) {
            return Err(invalid(f, "it is not an MD5 in 32 hex digits"));
        }
    }
    Ok(())
}

/// A source package's paragraph (a `.dsc`, policy §5.4), or — [`Mode::Apt`] — a `Sources`
/// stanza as `apt-get source` and `build-dep` read it.
pub fn check_source(fields: &[Field<'_>], mode: Mode) -> Result<(), FieldError> {
    for f in fields {
        if let Some((_, rules)) = SOURCE_RELATIONS.iter().find(|(n, _)| f.is(n)) {
            relations(f, *rules, mode)?;
            continue;
        }
        if mode == Mode::Apt {
            continue;
        }
        if common_field(f)? {
            continue;
        }
        match f.name.to_ascii_lowercase().as_str() {
            "source" | "version" => single_line(f)?,
            "format" => {
                single_line(f)?;
                let (number, kind) = f.value.split_once(' ').map_or((f.value.as_str(), ""), |(n, k)| (n, k.trim()));
                let number_ok = number.split('.').count() <= 2
                    && number.split('.').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
                let kind_ok = kind.is_empty()
                    || kind.strip_prefix('(').and_then(|k| k.strip_suffix(')')).is_some_and(|k| {
                        !k.is_empty() && k.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                    });
                if !number_ok || !kind_ok {
                    return Err(invalid(f, format!("{:?} is not a source format such as `3.0 (quilt)`", f.value)));
                }
            }
            "binary" | "testsuite-triggers" => {
                for name in f.folded().split(',').map(str::trim) {
                    let template = name.len() > 2 && name.starts_with('@') && name.ends_with('@');
                    if !(valid_name(name) || template && f.is("Testsuite-Triggers")) {
                        return Err(invalid(f, format!("{name:?} is not a package name")));
                    }
                }
            }
            "architecture" => {
                let archs: Vec<&str> = f.value.split_whitespace().collect();
                if archs.is_empty() {
                    return Err(invalid(f, "it is empty"));
                }
                if let Some(a) = archs.iter().find(|a| !is_arch_name(a)) {
                    return Err(invalid(f, format!("{a:?} is not an architecture or wildcard")));
                }
                if archs.contains(&"any") && archs.iter().any(|a| *a != "any" && *a != "all") {
                    return Err(invalid(f, "with `any`, the only other architecture may be `all`"));
                }
            }
            "uploaders" => {
                for a in f.folded().split(',').map(str::trim).filter(|a| !a.is_empty()) {
                    if !is_address(a) {
                        return Err(invalid(f, format!("{a:?} is not `Name <address@domain>`")));
                    }
                }
            }
            "testsuite" => {
                for t in f.folded().split(',').map(str::trim) {
                    if !is_profile_name(t) {
                        return Err(invalid(f, format!("{t:?} is not a test suite name")));
                    }
                }
            }
            "package-list" => {
                for line in f.value.split('\n').skip(1).map(str::trim).filter(|l| !l.is_empty()) {
                    let parts: Vec<&str> = line.split_whitespace().collect();
                    let ok = parts.len() >= 4
                        && valid_name(parts[0])
                        && is_profile_name(parts[1])
                        && is_section(parts[2])
                        // dpkg-source writes `unknown` where the source stanza names none.
                        && (PRIORITIES.iter().any(|p| p.eq_ignore_ascii_case(parts[3])) || parts[3] == "unknown")
                        && parts[4..]
                            .iter()
                            .all(|kv| kv.split_once('=').is_some_and(|(k, v)| !k.is_empty() && !v.is_empty()));
                    if !ok {
                        return Err(invalid(
                            f,
                            format!("{line:?} is not `package type section priority [key=value …]`"),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// One stanza of a `Packages` index — or, with a `Directory` and no `Filename`, of a `Sources`
/// index — as apt reads it ([`Mode::Apt`]).
pub fn check_stanza(stanza: &str) -> Result<(), FieldError> {
    let fields = apt_paragraph(stanza)?;
    if get(&fields, "Filename").is_none() && get(&fields, "Directory").is_some() {
        if get(&fields, "Package").is_none_or(|f| f.value.is_empty()) {
            return Err(FieldError::Invalid { field: "Package".into(), why: "it is missing".into() });
        }
        return check_source(&fields, Mode::Apt);
    }
    check_packages_stanza(&fields)
}

/// A `Packages` or `Sources` index as apt reads it, stanza by stanza: how many stanzas, or the
/// first one apt could not read — named by its `Package` and `Version` (or its number) — and why.
pub fn check_index(text: &str) -> Result<usize, (String, FieldError)> {
    let mut count = 0;
    for stanza in text.split("\n\n").map(|s| s.trim_matches('\n')).filter(|s| !s.is_empty()) {
        count += 1;
        if let Err(e) = check_stanza(stanza) {
            let value = |name: &str| {
                stanza.lines().find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
                })
            };
            let who = match (value("Package"), value("Version")) {
                (Some(p), Some(v)) => format!("{p} {v}"),
                (Some(p), None) => p,
                _ => format!("stanza {count}"),
            };
            return Err((who, e));
        }
    }
    Ok(count)
}

/// `^[a-z0-9][a-z0-9+.-]+$`
pub fn valid_name(name: &str) -> bool {
    name.len() >= 2
        && name.len() <= 128
        && name.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+.-".contains(&b))
}

/// Debian version syntax: `[epoch:]upstream[-revision]`.
pub fn valid_version(v: &str) -> bool {
    if v.is_empty() || v.len() > 256 {
        return false;
    }
    let (epoch, rest) = match v.split_once(':') {
        Some((e, r)) => (Some(e), r),
        None => (None, v),
    };
    if epoch.is_some_and(|e| e.is_empty() || !e.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    let (upstream, revision) = match rest.rsplit_once('-') {
        Some((u, r)) => (u, Some(r)),
        None => (rest, None),
    };
    let upstream_ok = upstream.bytes().next().is_some_and(|b| b.is_ascii_digit())
        && upstream.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || b"._+~".contains(&b)
                || (b == b'-' && revision.is_some())
                || (b == b':' && epoch.is_some())
        });
    let revision_ok =
        revision.is_none_or(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_alphanumeric() || b".+~".contains(&b)));
    upstream_ok && revision_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binary(extra: &str) -> Result<(), FieldError> {
        let text = format!("Package: foo\nVersion: 1.0-1\nArchitecture: amd64\n{extra}");
        check_binary(&paragraph(&text)?, Mode::Policy)
    }

    fn refused(extra: &str) -> String {
        binary(extra).err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn real_relations_pass() -> Result<(), FieldError> {
        binary("Depends: libc6 (>= 2.34), libjq1 (= 1.6-2.1), python3:any, foo | bar (<< 2:1.0~rc1+dfsg-1)\n")?;
        binary("Pre-Depends: dpkg (>= 1.17.14)\nRecommends: aa\nSuggests: bb, cc\nEnhances: dd\n")?;
        binary("Breaks: xx (<< 1)\nConflicts: yy\nReplaces: zz (<= 3)\nProvides: virt, foo-abi-1 (= 1.0)\n")?;
        binary("Built-Using: gcc-12 (= 12.2.0-14), rust-foo (= 1.0-1)\nStatic-Built-Using: golang-x (= 0.0~git1-1)\n")?;
        binary("Depends: aa,\n bb (>= 1),\n cc\n")?;
        binary("Depends: libfoo(>=1.0)\n")?;
        binary("Multi-Arch: same\nPriority: optional\nSection: non-free/libs\nInstalled-Size: 1234\n")?;
        binary("Essential: yes\nProtected: no\nMaintainer: Jane Doe <jane@example.org>\nSource: foo-src (1.0-1)\n")?;
        binary("Description: a thing\n It does this.\n .\n  verbatim\n")?;
        binary("X-Custom-Field: anything goes here\n")?;
        // What fpm writes, and dpkg-source's Package-List without a priority.
        binary("Maintainer: <builder@ci-runner-7>\nBugs: mailto:a@b.c\nOrigin: Some Vendor\n")?;
        binary("Maintainer: <@ci-runner-7>\nDescription: x\n\ttabbed line\n")?;
        Ok(())
    }

    #[test]
    fn each_malformed_field_is_named() {
        for (extra, field, why) in [
            ("Depends: foo (>= )\n", "Depends", "no version"),
            ("Depends: foo (>= 1.0\n", "Depends", "no ')'"),
            ("Depends: , foo\n", "Depends", "empty entry"),
            ("Depends: foo,\n", "Depends", "empty entry"),
            ("Depends: foo |\n", "Depends", "empty alternative"),
            ("Depends: Foo\n", "Depends", "not a package name"),
            ("Depends: foo (> 1)\n", "Depends", "obsolete"),
            ("Depends: foo (=> 1)\n", "Depends", "not an operator"),
            ("Depends: foo (1.0)\n", "Depends", "no operator"),
            ("Depends: foo (>= a.b)\n", "Depends", "not a Debian version"),
            ("Depends: foo [amd64]\n", "Depends", "source package's build relations"),
            ("Depends: foo <!nocheck>\n", "Depends", "source package's build relations"),
            ("Depends: foo bar\n", "Depends", "unexpected"),
            ("Depends: foo:native\n", "Depends", ":native"),
            ("Depends: foo:AMD64\n", "Depends", "not an architecture"),
            ("Depends: bar (=1)\n", "Depends", "apt 2.6"),
            ("Depends:\n", "Depends", "empty"),
            ("Pre-Depends: (>= 1)\n", "Pre-Depends", "not a package name"),
            ("Recommends: aa bb\n", "Recommends", "unexpected"),
            ("Suggests: aa,,bb\n", "Suggests", "empty entry"),
            ("Enhances: aa (<<)\n", "Enhances", "no version"),
            ("Breaks: aa | bb\n", "Breaks", "alternatives"),
            ("Conflicts: aa | bb\n", "Conflicts", "alternatives"),
            ("Replaces: aa | bb\n", "Replaces", "alternatives"),
            ("Provides: aa (>= 1)\n", "Provides", "exact version"),
            ("Provides: aa | bb\n", "Provides", "alternatives"),
            ("Provides:\n", "Provides", "empty"),
            ("Built-Using: gcc\n", "Built-Using", "exact version is required"),
            ("Static-Built-Using: gcc (>= 1)\n", "Static-Built-Using", "exact version"),
            ("Built-Using: gcc:any (= 1)\n", "Built-Using", "qualifier"),
            ("Multi-Arch: maybe\n", "Multi-Arch", "not no, same"),
            ("Priority: urgent\n", "Priority", "not one of"),
            ("Section: my section\n", "Section", "not a section"),
            ("Maintainer: nobody\n", "Maintainer", "Name <address@domain>"),
            ("Maintainer: a@b\n", "Maintainer", "Name <address@domain>"),
            ("Maintainer: Jane <jane>\n", "Maintainer", "Name <address@domain>"),
            ("Installed-Size: 12kB\n", "Installed-Size", "digits only"),
            ("Essential: maybe\n", "Essential", "yes or no"),
            ("Description:\n body\n", "Description", "synopsis"),
            ("Description: x\n .more\n", "Description", "reserved"),
            ("Description-md5: 1234\n", "Description-md5", "32 hex"),
            ("Source: Foo\n", "Source", "source package name"),
            ("Source: foo (bar)\n", "Source", "name (version)"),
            ("Homepage: http://a b\n", "Homepage", "one word"),
        ] {
            let message = refused(extra);
            assert!(message.contains(&format!("the field {field} is invalid")), "{extra:?}: {message}");
            assert!(message.contains(why), "{extra:?}: {message}");
        }
        assert!(refused("Multi-Arch: same\n").is_empty());
        let all = "Package: foo\nVersion: 1\nArchitecture: all\nMulti-Arch: same\n";
        assert!(check_binary(&paragraph(all).unwrap_or_default(), Mode::Policy).is_err());
    }

    #[test]
    fn stanza_syntax() {
        assert_eq!(paragraph("Package: a\n\nVersion: 1"), Err(FieldError::Blank(2)));
        assert_eq!(paragraph("Package: a\n \t\nVersion: 1"), Err(FieldError::Blank(2)));
        assert_eq!(paragraph(" x\nPackage: a"), Err(FieldError::Syntax(1)));
        assert_eq!(paragraph("Package a"), Err(FieldError::Syntax(1)));
        assert!(matches!(paragraph("#Package: a"), Err(FieldError::Name { .. })));
        assert!(matches!(paragraph("-Package: a"), Err(FieldError::Name { .. })));
        assert!(matches!(paragraph("Pack age: a"), Err(FieldError::Name { .. })));
        assert_eq!(paragraph("Package: a\x1b[31m"), Err(FieldError::Control(1)));
        assert_eq!(paragraph("Package: a\nPACKAGE: b"), Err(FieldError::Duplicate("PACKAGE".into())));
        let f = paragraph("A: 1\r\nB: two\r\n lines\r\n").unwrap_or_default();
        assert_eq!(f.len(), 2);
        assert_eq!(f[1].value, "two\n lines");
    }

    #[test]
    fn build_relations_of_a_source_package() -> Result<(), FieldError> {
        let ok = "Source: foo\nVersion: 1.0-1\nFormat: 3.0 (quilt)\nBinary: foo, libfoo1\nArchitecture: any all\n\
                  Maintainer: A <a@b.c>\nUploaders: B <b@c.d>, C D <c@d.e>\nStandards-Version: 4.6.2\n\
                  Build-Depends: debhelper-compat (= 13), libssl-dev [!hurd-i386 !kfreebsd-any] <!nocheck> <cross>, gcc:native, python3:any | python3-all\n\
                  Build-Conflicts: autoconf2.13\nTestsuite: autopkgtest\nTestsuite-Triggers: @builddeps@, python3\n\
                  Package-List:\n foo deb utils optional arch=any\n libfoo1 deb libs optional arch=any profile=!stage1\n";
        check_source(&paragraph(ok)?, Mode::Policy)?;
        for (bad, field) in [
            ("Build-Depends: aa [amd64 !i386]\n", "Build-Depends"),
            ("Build-Depends: aa []\n", "Build-Depends"),
            ("Build-Depends: aa <>\n", "Build-Depends"),
            ("Build-Depends: aa [amd64\n", "Build-Depends"),
            ("Build-Conflicts: aa | bb\n", "Build-Conflicts"),
            ("Build-Depends-Indep: A\n", "Build-Depends-Indep"),
            ("Binary: foo, Bar\n", "Binary"),
            ("Architecture: any amd64\n", "Architecture"),
            ("Format: three\n", "Format"),
            ("Uploaders: nobody\n", "Uploaders"),
            ("Package-List:\n foo deb\n", "Package-List"),
        ] {
            let text = format!("Source: foo\nVersion: 1\n{bad}");
            let e = check_source(&paragraph(&text)?, Mode::Policy).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains(&format!("the field {field} is invalid")), "{bad:?}: {e}");
        }
        Ok(())
    }

    #[test]
    fn what_apt_cannot_read_in_an_index() {
        let good = "Package: a\nVersion: 1\nArchitecture: all\nDepends: b (>= 1), c:any, d (<< 2),\nProvides: e\n\n\
                    Package: f\nVersion: 2\nArchitecture: amd64\nBreaks: g (< 2)\n";
        assert_eq!(check_index(good), Ok(2));
        for (bad, why) in [
            ("Package: a\nVersion: 1\nArchitecture: all\nDepends: b (>= )\n", "no version"),
            ("Package: a\nVersion: 1\nArchitecture: all\nDepends: b [amd64]\n", "apt cannot read"),
            ("Package: a\nVersion: 1\nArchitecture: all\nDepends: , b\n", "empty entry"),
            ("Package: a\nVersion: 1\nArchitecture: all\nDepends: b (=1)\n", "too short"),
            ("Package: a\nVersion: 1\nArchitecture: all\nProvides:\n", "empty"),
            ("Package: a\nVersion: 1\nArchitecture: all\nDescription-md5: 12\n", "32 hex"),
            ("Version: 1\nArchitecture: all\n", "Package"),
        ] {
            let text = format!("{good}\n{bad}");
            let (stanza, e) = check_index(&text).err().unwrap_or((String::new(), FieldError::Syntax(0)));
            assert_eq!(stanza, if bad.starts_with("Package") { "a 1" } else { "stanza 3" }, "{bad:?}");
            assert!(e.to_string().contains(why), "{bad:?}: {e}");
        }
        assert_eq!(check_index("Package: a\nDirectory: pool/a\nBuild-Depends: b [amd64] <!nocheck>\n"), Ok(1));
        // What apt reads though policy would not: a repeated field, a white-space-only
        // continuation, a control character, an odd field name.
        assert_eq!(
            check_index("Package: a\nVersion: 1\nArchitecture: all\nX: 1\nX: 2\nDescription: d\n \n .\n#Odd: \x07\n"),
            Ok(1)
        );
        assert!(check_index("Package: a\nDirectory: pool/a\nBuild-Depends: b (>=\n").is_err());
    }
}
