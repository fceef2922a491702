//! What a recipe's `conanfile.py` declares that a repository's policy reads, without running
//! it: the class attribute `license`, a string or a tuple or list of strings.

/// Most bytes of a `conanfile.py` read for its licenses.
pub const MAX_CONANFILE: usize = 1024 * 1024;

/// The licenses a recipe declares (`license = "MIT"`, `license = ("MIT", "BSD-3-Clause")`,
/// the value possibly over several lines): each string literal of the first `license`
/// assignment; none when there is none (a recipe may compute it: it is not run).
pub fn declared_licenses(conanfile: &str) -> Vec<String> {
    let mut lines = conanfile.lines();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        let Some(rest) = t.strip_prefix("license") else { continue };
        let rest = rest.trim_start();
        let Some(value) = rest.strip_prefix('=').filter(|v| !v.starts_with('=')) else { continue };
        // The value, with the lines a bracket left open.
        let mut text = value.to_string();
        let mut depth = brackets(value);
        while depth > 0 {
            let Some(more) = lines.next() else { break };
            text.push('\n');
            text.push_str(more);
            depth += brackets(more);
        }
        return literals(&text);
    }
    Vec::new()
}

/// How many brackets `text` leaves open (outside string literals).
fn brackets(text: &str) -> i32 {
    let mut depth = 0;
    let mut quote = None;
    for c in text.chars() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '(' | '[') => depth += 1,
            (None, ')' | ']') => depth -= 1,
            (None, '#') => break,
            _ => {}
        }
    }
    depth
}

/// The string literals of `text` (up to a comment outside them).
fn literals(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<(char, String)> = None;
    let mut comment = false;
    for c in text.chars() {
        if comment {
            // A comment runs to the end of its line.
            comment = c != '\n';
            continue;
        }
        match current.as_mut() {
            Some((q, s)) if c == *q => {
                out.push(std::mem::take(s));
                current = None;
            }
            Some((_, s)) => s.push(c),
            None if c == '"' || c == '\'' => current = Some((c, String::new())),
            None => comment = c == '#',
        }
    }
    out.into_iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn licenses_as_recipes_declare_them() {
        let one = "class Hello(ConanFile):\n    name = \"hello\"\n    license = \"MIT\"\n    url = \"x\"\n";
        assert_eq!(declared_licenses(one), ["MIT"]);
        let many = "class A(ConanFile):\n    license = (\"GPL-3.0-only\",\n               'BSD-3-Clause')  # two\n    name = 'a'\n";
        assert_eq!(declared_licenses(many), ["GPL-3.0-only", "BSD-3-Clause"]);
        assert_eq!(
            declared_licenses("class A(ConanFile):\n    licenses_note = 'x'\n    license == 'y'\n"),
            Vec::<String>::new()
        );
        assert_eq!(declared_licenses("    license = ['Zlib', # a 'comment'\n 'MIT']"), ["Zlib", "MIT"]);
        assert_eq!(declared_licenses("    license = \"(unterminated"), Vec::<String>::new());
    }
}
