//! Actions, privileges, principals and the one decision function.

use std::fmt;
use std::str::FromStr;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::selector::{Content, Selector};

/// The built-in role that holds every action on every repository and the admin API.
pub const ADMIN_ROLE: &str = "admin";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Nexus's `read` and `browse`.
    #[serde(alias = "browse")]
    Read,
    /// Nexus's `add` and `edit`.
    #[serde(alias = "add", alias = "edit")]
    Write,
    Delete,
    Admin,
}

impl Action {
    pub const ALL: [Action; 4] = [Action::Read, Action::Write, Action::Delete, Action::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Delete => "delete",
            Self::Admin => "admin",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Action {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "read" | "browse" => Ok(Self::Read),
            "write" | "add" | "edit" => Ok(Self::Write),
            "delete" => Ok(Self::Delete),
            "admin" => Ok(Self::Admin),
            other => Err(format!("unknown action {other:?}; use read, write, delete or admin")),
        }
    }
}

/// Actions on the repositories whose names match a glob (`*` any run, `?` one character); with a
/// content selector, only on the content it selects (`crate::selector`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Privilege {
    pub repositories: String,
    pub actions: Vec<Action>,
    /// The name of a content selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_selector: Option<String>,
    /// The selector `content_selector` names, as it was when the principal was loaded; `None`
    /// with a name (a selector since deleted) selects nothing.
    #[serde(skip)]
    pub selector: Option<Arc<Selector>>,
}

impl Privilege {
    pub fn validate(&self) -> Result<(), String> {
        let p = &self.repositories;
        let ok =
            !p.is_empty() && p.len() <= 128 && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-*?".contains(&b));
        if !ok {
            return Err(format!(
                "invalid repository pattern {p:?}: use repository-name characters with * and ? as wildcards"
            ));
        }
        if self.actions.is_empty() {
            return Err(format!("the privilege on {p:?} lists no actions"));
        }
        if let Some(name) = &self.content_selector {
            if !crate::is_plain_name(name, b"-_.") {
                return Err(format!("invalid content selector name {name:?}"));
            }
            if self.actions.contains(&Action::Admin) {
                return Err(format!(
                    "the privilege on {p:?} with content selector {name:?} lists admin: a selector narrows read, write and delete only"
                ));
            }
        }
        Ok(())
    }

    /// Covers `action` on all of `repository` (no content selector).
    pub fn covers(&self, repository: &str, action: Action) -> bool {
        self.content_selector.is_none() && self.reaches(repository, action)
    }

    /// Covers `action` on some or all of `repository`.
    fn reaches(&self, repository: &str, action: Action) -> bool {
        self.actions.contains(&action) && glob_match(&self.repositories, repository)
    }

    /// Covers `action` on `content` of `repository`.
    fn covers_content(&self, repository: &str, action: Action, content: &Content<'_>) -> bool {
        self.reaches(repository, action)
            && match &self.content_selector {
                None => true,
                Some(_) => self.selector.as_ref().is_some_and(|s| s.matches(content)),
            }
    }

    /// Covers every repository (the pattern is `*`): what the global admin API needs.
    pub fn is_global(&self) -> bool {
        self.repositories == "*" && self.content_selector.is_none()
    }
}

/// Glob match with `*` (any run, also empty) and `?` (one character); iterative, linear-ish.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// A token's narrowing: it can never do more than its user, only less.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenScope {
    pub token_id: String,
    pub repositories: Option<String>,
    pub actions: Option<Vec<Action>>,
    pub expires_at: Option<i64>,
    /// A web UI session (signed in with a password), not an API token.
    pub session: bool,
}

/// Who is calling, with everything needed to decide without the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    Anonymous { privileges: Vec<Privilege> },
    User { id: i64, username: String, privileges: Vec<Privilege>, token: Option<TokenScope> },
}

/// How much of a repository a principal may act on ([`Principal::reach`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    All,
    /// What a content selector selects: decided per file or component.
    Part,
    Nothing,
}

/// What the decision needs to know about the repository.
#[derive(Debug, Clone, Copy)]
pub struct RepoFacts<'a> {
    pub name: &'a str,
    pub anonymous_read: bool,
}

impl Principal {
    pub fn username(&self) -> &str {
        match self {
            Self::Anonymous { .. } => "anonymous",
            Self::User { username, .. } => username,
        }
    }

    pub fn is_anonymous(&self) -> bool {
        matches!(self, Self::Anonymous { .. })
    }

    /// May this principal perform `action` on all of the repository? `global_anonymous_read` is
    /// `security.anonymous_read`. Anonymous callers can only ever read.
    pub fn allows(&self, repo: RepoFacts<'_>, action: Action, global_anonymous_read: bool) -> bool {
        self.reach(repo, action, global_anonymous_read) == Reach::All
    }

    /// How much of the repository this principal may `action`: all of it, only what a content
    /// selector of one of its privileges selects, or nothing.
    pub fn reach(&self, repo: RepoFacts<'_>, action: Action, global_anonymous_read: bool) -> Reach {
        let privileges = self.eligible(repo, action, global_anonymous_read);
        if privileges.iter().any(|p| p.covers(repo.name, action)) {
            Reach::All
        } else if privileges.iter().any(|p| p.reaches(repo.name, action)) {
            Reach::Part
        } else {
            Reach::Nothing
        }
    }

    /// May this principal perform `action` on `content` of the repository?
    pub fn allows_content(
        &self,
        repo: RepoFacts<'_>,
        action: Action,
        global_anonymous_read: bool,
        content: &Content<'_>,
    ) -> bool {
        self.eligible(repo, action, global_anonymous_read).iter().any(|p| p.covers_content(repo.name, action, content))
    }

    /// The content selectors through which this principal may `action` part of the repository
    /// (their names, for a refusal's message).
    pub fn selectors_for(&self, repo: RepoFacts<'_>, action: Action, global_anonymous_read: bool) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .eligible(repo, action, global_anonymous_read)
            .iter()
            .filter(|p| p.reaches(repo.name, action))
            .filter_map(|p| p.content_selector.as_deref())
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// The privileges that may grant `action` on the repository: none for an anonymous caller
    /// where anonymous reading is off or for anything but reading, and none outside a token's
    /// narrowing.
    fn eligible(&self, repo: RepoFacts<'_>, action: Action, global_anonymous_read: bool) -> &[Privilege] {
        match self {
            Self::Anonymous { privileges } => {
                if action == Action::Read && global_anonymous_read && repo.anonymous_read {
                    privileges
                } else {
                    &[]
                }
            }
            Self::User { privileges, token, .. } => {
                if let Some(t) = token {
                    if t.repositories.as_deref().is_some_and(|pat| !glob_match(pat, repo.name)) {
                        return &[];
                    }
                    if t.actions.as_ref().is_some_and(|a| !a.contains(&action)) {
                        return &[];
                    }
                }
                privileges
            }
        }
    }

    /// The global admin privilege (`admin` on `*`), needed by the admin API outside one repository.
    pub fn is_admin(&self) -> bool {
        match self {
            Self::Anonymous { .. } => false,
            Self::User { privileges, token, .. } => {
                let token_ok = token.as_ref().is_none_or(|t| {
                    t.repositories.as_deref().is_none_or(|r| r == "*")
                        && t.actions.as_ref().is_none_or(|a| a.contains(&Action::Admin))
                });
                token_ok && privileges.iter().any(|p| p.is_global() && p.actions.contains(&Action::Admin))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        for (p, n, m) in [
            ("*", "anything", true),
            ("debs-*", "debs-prod", true),
            ("debs-*", "debs-", true),
            ("debs-*", "debs", false),
            ("d?bs", "debs", true),
            ("*-prod", "go-prod", true),
            ("*-prod", "go-production", false),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
        ] {
            assert_eq!(glob_match(p, n), m, "{p} vs {n}");
        }
    }

    fn user(privs: &[(&str, &[Action])], token: Option<TokenScope>) -> Principal {
        Principal::User {
            id: 1,
            username: "u".into(),
            privileges: privs
                .iter()
                .map(|(r, a)| Privilege { repositories: r.to_string(), actions: a.to_vec(), ..Default::default() })
                .collect(),
            token,
        }
    }

    #[test]
    fn decisions() {
        let debs = RepoFacts { name: "debs", anonymous_read: true };
        let closed = RepoFacts { name: "closed", anonymous_read: false };
        let anon = Principal::Anonymous {
            privileges: vec![Privilege {
                repositories: "*".into(),
                actions: vec![Action::Read, Action::Write],
                ..Default::default()
            }],
        };
        assert!(anon.allows(debs, Action::Read, true));
        assert!(!anon.allows(debs, Action::Read, false), "global switch");
        assert!(!anon.allows(closed, Action::Read, true), "per-repository flag");
        assert!(!anon.allows(debs, Action::Write, true), "anonymous never writes");

        let writer = user(&[("deb*", &[Action::Read, Action::Write])], None);
        assert!(writer.allows(debs, Action::Write, true));
        assert!(!writer.allows(debs, Action::Delete, true));
        assert!(!writer.allows(closed, Action::Read, true));
        assert!(!writer.is_admin());

        let narrowed = user(
            &[("*", &Action::ALL)],
            Some(TokenScope {
                token_id: "t".into(),
                repositories: Some("debs".into()),
                actions: Some(vec![Action::Read]),
                expires_at: None,
                session: false,
            }),
        );
        assert!(narrowed.allows(debs, Action::Read, true));
        assert!(!narrowed.allows(debs, Action::Write, true));
        assert!(!narrowed.allows(closed, Action::Read, true));
        assert!(!narrowed.is_admin());
        assert!(user(&[("*", &Action::ALL)], None).is_admin());
        assert!(!user(&[("d*", &Action::ALL)], None).is_admin());
    }

    #[test]
    fn a_content_selector_narrows_a_privilege() -> Result<(), Box<dyn std::error::Error>> {
        let shared = RepoFacts { name: "shared", anonymous_read: false };
        let selector = Selector::parse(r#"path =^ "/pool/main/t/team-a-""#)?;
        let narrowed = |selector: Option<Selector>| Principal::User {
            id: 1,
            username: "a".into(),
            privileges: vec![Privilege {
                repositories: "shared".into(),
                actions: vec![Action::Read, Action::Write],
                content_selector: Some("team-a".into()),
                selector: selector.map(Arc::new),
            }],
            token: None,
        };
        let a = narrowed(Some(selector));
        let content = |path| Content { format: "apt", repository: "shared", path, ..Content::default() };
        let (ours, theirs) = (content("/pool/main/t/team-a-tool/x.deb"), content("/pool/main/t/team-b-tool/x.deb"));
        assert_eq!(a.reach(shared, Action::Write, true), Reach::Part);
        assert!(!a.allows(shared, Action::Write, true), "part of a repository is not all of it");
        assert_eq!(a.reach(shared, Action::Delete, true), Reach::Nothing);
        assert!(a.allows_content(shared, Action::Write, true, &ours));
        assert!(!a.allows_content(shared, Action::Write, true, &theirs));
        assert!(!a.allows_content(shared, Action::Delete, true, &ours));
        assert_eq!(a.selectors_for(shared, Action::Read, true), ["team-a"]);
        assert!(
            !narrowed(None).allows_content(shared, Action::Read, true, &ours),
            "a deleted selector selects nothing"
        );
        let unplain = Privilege { content_selector: Some("a b".into()), ..Privilege::default() };
        assert!(Privilege { repositories: "x".into(), actions: vec![Action::Read], ..unplain }.validate().is_err());
        assert_eq!("browse".parse::<Action>(), Ok(Action::Read));
        assert_eq!(
            serde_json::from_str::<Vec<Action>>(r#"["add","edit","browse"]"#)?,
            [Action::Write, Action::Write, Action::Read]
        );
        Ok(())
    }
}
