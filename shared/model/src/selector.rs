//! Content selectors: which content of a repository a privilege covers, as an expression in
//! Nexus's CSEL — comparisons of what a request or a component is (`format`, `repository`,
//! `path`, `name`, `version`, `group`) joined with `and`, `or`, `!` and brackets:
//!
//! ```text
//! expression := or
//! or         := and { ("or" | "||") and }
//! and        := unary { ("and" | "&&") unary }
//! unary      := "!" unary | "(" or ")" | comparison
//! comparison := variable ("==" | "!=" | "=^" | "=~") string
//! variable   := "format" | "repository" | "path" | "name" | "version" | "group"
//!             | "coordinate." ("name" | "version" | "group")
//! string     := '"' … '"' | "'" … "'"      (a backslash escapes the next character)
//! ```
//!
//! `==` is equality, `!=` its negation, `=^` "starts with", `=~` a regular expression that must
//! match the whole value. A path begins with `/` (the path below `/repository/<name>`). Where a
//! variable is unknown (metadata such as an index has no component name or version), every
//! comparison of it is false, `!=` included: a selector never grants more because less is known.
//! Parsing is linear and bounded (1,024 characters, 32 levels of brackets); a parse error names
//! the column (1-based) where the expression went wrong.

use std::fmt;

use regex::Regex;

const MAX_LEN: usize = 1024;
const MAX_DEPTH: usize = 32;

/// What a selector is evaluated against.
#[derive(Debug, Clone, Copy, Default)]
pub struct Content<'a> {
    pub format: &'a str,
    pub repository: &'a str,
    /// Beginning with `/`.
    pub path: &'a str,
    pub name: Option<&'a str>,
    pub version: Option<&'a str>,
    pub group: Option<&'a str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variable {
    Format,
    Repository,
    Path,
    Name,
    Version,
    Group,
}

impl Variable {
    fn of(word: &str) -> Option<Self> {
        Some(match word {
            "format" => Self::Format,
            "repository" => Self::Repository,
            "path" => Self::Path,
            "name" | "coordinate.name" => Self::Name,
            "version" | "coordinate.version" => Self::Version,
            "group" | "coordinate.group" => Self::Group,
            _ => return None,
        })
    }

    fn value<'a>(self, c: &Content<'a>) -> Option<&'a str> {
        match self {
            Self::Format => Some(c.format),
            Self::Repository => Some(c.repository),
            Self::Path => Some(c.path),
            Self::Name => c.name,
            Self::Version => c.version,
            Self::Group => c.group,
        }
    }
}

#[derive(Debug, Clone)]
enum Test {
    Equals(String),
    NotEquals(String),
    StartsWith(String),
    Matches(Regex),
}

#[derive(Debug, Clone)]
enum Node {
    Compare(Variable, Test),
    Not(Box<Node>),
    And(Vec<Node>),
    Or(Vec<Node>),
}

impl Node {
    fn eval(&self, c: &Content<'_>) -> bool {
        match self {
            Self::Compare(var, test) => var.value(c).is_some_and(|v| match test {
                Test::Equals(s) => v == s,
                Test::NotEquals(s) => v != s,
                Test::StartsWith(s) => v.starts_with(s.as_str()),
                Test::Matches(r) => r.is_match(v),
            }),
            // `!` of an unknown comparison stays false: a selector never grants more because
            // less is known.
            Self::Not(inner) => !inner.eval(c) && inner.decidable(c),
            Self::And(all) => all.iter().all(|n| n.eval(c)),
            Self::Or(any) => any.iter().any(|n| n.eval(c)),
        }
    }

    /// Whether every variable the node compares is known for `c`.
    fn decidable(&self, c: &Content<'_>) -> bool {
        match self {
            Self::Compare(var, _) => var.value(c).is_some(),
            Self::Not(inner) => inner.decidable(c),
            Self::And(all) | Self::Or(all) => all.iter().all(|n| n.decidable(c)),
        }
    }
}

/// A parsed content selector expression.
#[derive(Debug, Clone)]
pub struct Selector {
    source: String,
    root: Node,
}

impl PartialEq for Selector {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Selector {}

impl Selector {
    pub fn parse(expression: &str) -> Result<Self, SelectorError> {
        if expression.chars().count() > MAX_LEN {
            return Err(SelectorError { column: MAX_LEN + 1, message: format!("longer than {MAX_LEN} characters") });
        }
        let mut p = Parser { tokens: lex(expression)?, at: 0, depth: 0, end: expression.chars().count() + 1 };
        if p.tokens.is_empty() {
            return Err(SelectorError { column: 1, message: "the expression is empty".into() });
        }
        let root = p.or()?;
        if let Some(t) = p.tokens.get(p.at) {
            return Err(SelectorError {
                column: t.column,
                message: format!("expected `and`, `or` or the end, found {}", t.kind),
            });
        }
        Ok(Self { source: expression.to_string(), root })
    }

    pub fn matches(&self, content: &Content<'_>) -> bool {
        self.root.eval(content)
    }

    pub fn expression(&self) -> &str {
        &self.source
    }
}

/// Where and why an expression does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorError {
    /// 1-based, in characters.
    pub column: usize,
    pub message: String,
}

impl fmt::Display for SelectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

impl std::error::Error for SelectorError {}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Word(String),
    Str(String),
    Op(&'static str),
    Open,
    Close,
    And,
    Or,
    Not,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Word(w) => write!(f, "`{w}`"),
            Self::Str(s) => write!(f, "the string {s:?}"),
            Self::Op(o) => write!(f, "`{o}`"),
            Self::Open => f.write_str("`(`"),
            Self::Close => f.write_str("`)`"),
            Self::And => f.write_str("`and`"),
            Self::Or => f.write_str("`or`"),
            Self::Not => f.write_str("`!`"),
        }
    }
}

struct Token {
    kind: Kind,
    column: usize,
}

fn lex(s: &str) -> Result<Vec<Token>, SelectorError> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let column = i + 1;
        let two: String = chars[i..chars.len().min(i + 2)].iter().collect();
        let kind = if c.is_whitespace() {
            i += 1;
            continue;
        } else if c == '(' {
            i += 1;
            Kind::Open
        } else if c == ')' {
            i += 1;
            Kind::Close
        } else if let Some(op) = ["==", "!=", "=^", "=~"].into_iter().find(|o| *o == two) {
            i += 2;
            Kind::Op(op)
        } else if two == "&&" {
            i += 2;
            Kind::And
        } else if two == "||" {
            i += 2;
            Kind::Or
        } else if c == '!' {
            i += 1;
            Kind::Not
        } else if c == '"' || c == '\'' {
            let mut value = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => {
                        return Err(SelectorError {
                            column,
                            message: format!("the string opened here never ends (no closing {c})"),
                        })
                    }
                    Some('\\') => {
                        let Some(&next) = chars.get(i + 1) else {
                            return Err(SelectorError {
                                column: i + 1,
                                message: "a backslash ends the expression".into(),
                            });
                        };
                        value.push(next);
                        i += 2;
                    }
                    Some(&q) if q == c => {
                        i += 1;
                        break;
                    }
                    Some(&other) => {
                        value.push(other);
                        i += 1;
                    }
                }
            }
            Kind::Str(value)
        } else if c.is_ascii_alphabetic() {
            let start = i;
            while chars.get(i).is_some_and(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            match word.as_str() {
                "and" => Kind::And,
                "or" => Kind::Or,
                _ => Kind::Word(word),
            }
        } else {
            return Err(SelectorError { column, message: format!("unexpected character {c:?}") });
        };
        out.push(Token { kind, column });
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    depth: usize,
    /// The column just past the expression, where "the end" is.
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Kind> {
        self.tokens.get(self.at).map(|t| &t.kind)
    }

    fn column(&self) -> usize {
        self.tokens.get(self.at).map_or(self.end, |t| t.column)
    }

    fn found(&self) -> String {
        self.peek().map_or_else(|| "the end".to_string(), |k| k.to_string())
    }

    fn error(&self, expected: &str) -> SelectorError {
        SelectorError { column: self.column(), message: format!("expected {expected}, found {}", self.found()) }
    }

    fn or(&mut self) -> Result<Node, SelectorError> {
        let mut all = vec![self.and()?];
        while self.peek() == Some(&Kind::Or) {
            self.at += 1;
            all.push(self.and()?);
        }
        Ok(if all.len() == 1 { all.remove(0) } else { Node::Or(all) })
    }

    fn and(&mut self) -> Result<Node, SelectorError> {
        let mut all = vec![self.unary()?];
        while self.peek() == Some(&Kind::And) {
            self.at += 1;
            all.push(self.unary()?);
        }
        Ok(if all.len() == 1 { all.remove(0) } else { Node::And(all) })
    }

    fn unary(&mut self) -> Result<Node, SelectorError> {
        if self.depth >= MAX_DEPTH {
            return Err(SelectorError {
                column: self.column(),
                message: format!("nested deeper than {MAX_DEPTH} levels"),
            });
        }
        match self.peek() {
            Some(Kind::Not) => {
                self.at += 1;
                self.depth += 1;
                let inner = self.unary()?;
                self.depth -= 1;
                Ok(Node::Not(Box::new(inner)))
            }
            Some(Kind::Open) => {
                self.at += 1;
                self.depth += 1;
                let inner = self.or()?;
                self.depth -= 1;
                if self.peek() != Some(&Kind::Close) {
                    return Err(self.error("`)`"));
                }
                self.at += 1;
                Ok(inner)
            }
            _ => self.comparison(),
        }
    }

    fn comparison(&mut self) -> Result<Node, SelectorError> {
        let Some(Kind::Word(word)) = self.peek().cloned() else {
            return Err(self.error("a variable (format, repository, path, name, version, group), `!` or `(`"));
        };
        let Some(var) = Variable::of(&word) else {
            return Err(SelectorError {
                column: self.column(),
                message: format!("unknown variable `{word}`: use format, repository, path, name, version or group"),
            });
        };
        self.at += 1;
        let Some(Kind::Op(op)) = self.peek().cloned() else {
            return Err(self.error("`==`, `!=`, `=^` or `=~`"));
        };
        self.at += 1;
        let Some(Kind::Str(value)) = self.peek().cloned() else {
            return Err(self.error("a quoted string"));
        };
        let column = self.column();
        self.at += 1;
        let test = match op {
            "==" => Test::Equals(value),
            "!=" => Test::NotEquals(value),
            "=^" => Test::StartsWith(value),
            _ => {
                // The expression on its own first: `a)|(b` must not undo the anchoring.
                if let Err(e) = regex::RegexBuilder::new(&value).size_limit(1 << 20).build() {
                    return Err(SelectorError {
                        column,
                        message: format!(
                            "not a valid regular expression: {}",
                            e.to_string().lines().last().unwrap_or("")
                        ),
                    });
                }
                let anchored = format!("^(?:{value})$");
                let re =
                    regex::RegexBuilder::new(&anchored).size_limit(1 << 20).build().map_err(|e| SelectorError {
                        column,
                        message: format!(
                            "not a valid regular expression: {}",
                            e.to_string().lines().last().unwrap_or("")
                        ),
                    })?;
                Test::Matches(re)
            }
        };
        if var == Variable::Path {
            if let Test::Equals(s) | Test::StartsWith(s) = &test {
                if !s.starts_with('/') {
                    return Err(SelectorError { column, message: format!("a path begins with `/`: write \"/{s}\"") });
                }
            }
        }
        Ok(Node::Compare(var, test))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content<'a>(format: &'a str, path: &'a str, name: Option<&'a str>) -> Content<'a> {
        Content { format, repository: "shared", path, name, version: Some("1.0"), group: None }
    }

    #[test]
    fn nexus_examples_match_as_nexus_does() -> Result<(), SelectorError> {
        let s = Selector::parse(r#"format == "apt" and path =^ "/pool/main/t/team-a-""#)?;
        assert!(s.matches(&content("apt", "/pool/main/t/team-a-tool/team-a-tool_1.0_amd64.deb", None)));
        assert!(!s.matches(&content("apt", "/pool/main/t/team-b-tool/team-b-tool_1.0_amd64.deb", None)));
        assert!(!s.matches(&content("go", "/pool/main/t/team-a-tool/x", None)));

        let s = Selector::parse(r#"(path =^ "/dists/" || name =^ 'team-a-') && !(version == "0.1")"#)?;
        assert!(s.matches(&content("apt", "/dists/stable/InRelease", None)));
        assert!(s.matches(&content("apt", "/pool/x", Some("team-a-tool"))));
        assert!(!s.matches(&content("apt", "/pool/x", Some("team-b-tool"))));

        let s = Selector::parse(r#"path =~ "/example\.com/team-a/.*" or repository == "open""#)?;
        assert!(s.matches(&content("go", "/example.com/team-a/tool/@v/list", None)));
        assert!(!s.matches(&content("go", "/example.com/team-b/tool/@v/list", None)), "a regex matches the whole");
        assert!(!s.matches(&content("go", "x/example.com/team-a/tool", None)));
        Ok(())
    }

    #[test]
    fn unknown_values_never_grant() -> Result<(), SelectorError> {
        for e in [r#"name != "team-b-tool""#, r#"!(name == "team-b-tool")"#, r#"name =^ "team-a""#] {
            let s = Selector::parse(e)?;
            assert!(!s.matches(&content("apt", "/dists/stable/Release", None)), "{e}");
        }
        assert!(Selector::parse(r#"name != "team-b-tool""#)?.matches(&content("apt", "/p", Some("team-a-tool"))));
        Ok(())
    }

    #[test]
    fn errors_point_at_the_column() {
        for (e, column, says) in [
            (r#"format = "apt""#, 8, "unexpected character '='"),
            (r#"format == apt"#, 11, "expected a quoted string, found `apt`"),
            (r#"colour == "red""#, 1, "unknown variable `colour`"),
            (r#"format == "apt" and"#, 20, "found the end"),
            (r#"(format == "apt""#, 17, "expected `)`"),
            (r#"format == "apt" path == "/x""#, 17, "expected `and`, `or` or the end"),
            (r#"path =^ "pool/""#, 9, "a path begins with `/`"),
            (r#"name == "open"#, 9, "never ends"),
            (r#"name =~ "(""#, 9, "not a valid regular expression"),
            (r#"name =~ "a)|(b""#, 9, "not a valid regular expression"),
            ("", 1, "empty"),
        ] {
            match Selector::parse(e) {
                Ok(_) => panic!("{e:?} parsed"),
                Err(err) => {
                    assert_eq!(err.column, column, "{e:?}: {err}");
                    assert!(err.message.contains(says), "{e:?}: {err}");
                }
            }
        }
        let deep = format!("{}name == \"x\"{}", "(".repeat(40), ")".repeat(40));
        assert!(Selector::parse(&deep).is_err_and(|e| e.message.contains("nested deeper")));
        assert!(Selector::parse(&"a".repeat(2000)).is_err_and(|e| e.message.contains("longer than")));
    }
}
