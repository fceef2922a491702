//! Sign-in through LDAP directories (`[[security.ldap]]`): bind and search over LDAPS or
//! StartTLS, with a service account (search, then bind as the found entry) or by direct bind
//! (a DN template), groups mapped to roles, several directories asked in order.
//!
//! A directory is asked only for a name that is not a local user, and only when no cached
//! decision answers; the caller caches what it decides. One connection per question: sign-ins
//! are rare next to the requests their cached decisions answer.

use std::sync::Arc;
use std::time::Duration;

use ldap3::{dn_escape, ldap_escape, LdapConnAsync, LdapConnSettings, LdapError, Scope, SearchEntry};
use packyard_model::directory::{LdapDirectory, USERNAME, USER_DN};

use super::external::mapped_roles;

/// LDAP result code for a bind refused for its credentials (wrong password, locked account).
const INVALID_CREDENTIALS: u32 = 49;

pub use super::external::ExternalIdentity as DirectoryUser;

#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    /// The directory knows the user and refused the password (or the account is locked).
    #[error("invalid username or password")]
    Refused,
    /// No directory could answer; the cause is logged.
    #[error("the user directory cannot be reached; try again shortly")]
    Unavailable,
}

/// What a directory says of a known user without their password (for tokens and sessions).
#[derive(Debug)]
pub enum Recheck {
    Present(DirectoryUser),
    /// Not found by the user filter any more: removed, moved out of the base, or disabled.
    Gone,
    /// The directory binds users directly and has no account to look them up with: the user's
    /// state as last seen stands.
    Unknowable,
}

struct Directory {
    cfg: LdapDirectory,
    source: String,
    tls: Arc<rustls::ClientConfig>,
    bind_password: Option<String>,
}

/// The configured directories, in order.
pub struct Directories {
    dirs: Vec<Directory>,
}

impl Directories {
    /// Reads each directory's CA file and password file; an error names the key.
    pub fn new(configs: &[LdapDirectory]) -> anyhow::Result<Self> {
        let mut dirs = Vec::with_capacity(configs.len());
        for (i, cfg) in configs.iter().enumerate() {
            let tls = crate::certs::rustls_client_config(cfg.ca_file.as_deref())
                .map_err(|e| anyhow::anyhow!("bad value for key `security.ldap[{i}].ca_file`: {e}"))?;
            let bind_password = match (&cfg.bind_password, &cfg.bind_password_file) {
                (Some(p), _) => Some(p.clone()),
                (None, Some(file)) => {
                    let p = std::fs::read_to_string(file).map_err(|e| {
                        anyhow::anyhow!(
                            "bad value for key `security.ldap[{i}].bind_password_file`: {}: {e}",
                            file.display()
                        )
                    })?;
                    let p = p.trim_end_matches(['\r', '\n']).to_string();
                    if p.is_empty() {
                        anyhow::bail!(
                            "bad value for key `security.ldap[{i}].bind_password_file`: {} is empty",
                            file.display()
                        );
                    }
                    Some(p)
                }
                (None, None) => None,
            };
            dirs.push(Directory { source: cfg.source(), cfg: cfg.clone(), tls, bind_password });
        }
        Ok(Self { dirs })
    }

    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    /// Asks the directories in order: the first that knows the name decides. `Ok(None)`: none
    /// knows it. A name already recorded here as a directory's user (`owner`, its source) is
    /// asked of that directory only. A directory that cannot be reached ends the search with
    /// [`DirectoryError::Unavailable`]: a later directory must not claim a name the one that is
    /// down may own.
    pub async fn authenticate(
        &self,
        username: &str,
        password: &str,
        owner: Option<&str>,
    ) -> Result<Option<DirectoryUser>, DirectoryError> {
        if password.is_empty() {
            // LDAP takes a bind with an empty password as anonymous, which succeeds.
            return Err(DirectoryError::Refused);
        }
        for dir in self.dirs.iter().filter(|d| owner.is_none_or(|o| o == d.source)) {
            match dir.authenticate(username, password).await {
                Ok(Outcome::User(u)) => return Ok(Some(u)),
                Ok(Outcome::Refused) => return Err(DirectoryError::Refused),
                Ok(Outcome::Unknown) => {}
                Err(e) => {
                    tracing::warn!(directory = %dir.cfg.name, url = %dir.cfg.url, error = %e, "LDAP directory unavailable");
                    return Err(DirectoryError::Unavailable);
                }
            }
        }
        Ok(None)
    }

    /// Each directory as the administration shows it: what the configuration says of it, and
    /// whether it answers now (a connection, TLS, and the service account's bind when there is
    /// one), each asked once, side by side.
    pub async fn health(&self) -> Vec<DirectoryHealth> {
        let checks = self.dirs.iter().map(|dir| async move {
            let started = std::time::Instant::now();
            let answer = async {
                let mut conn = dir.connect().await?;
                let bound = if dir.cfg.bind_dn.is_some() { dir.service_bind(&mut conn).await } else { Ok(()) };
                conn.close().await;
                bound
            }
            .await;
            let c = &dir.cfg;
            DirectoryHealth {
                name: c.name.clone(),
                url: c.url.clone(),
                transport: if c.url.starts_with("ldaps://") {
                    "LDAPS"
                } else if c.starttls {
                    "StartTLS"
                } else {
                    "plain (passwords in the clear)"
                },
                mode: match (&c.bind_dn, &c.user_dn_template) {
                    (Some(dn), _) => format!("search under {} as {dn}, then bind as the user", c.user_base),
                    (None, Some(t)) => format!("direct bind as {t}"),
                    (None, None) => "direct bind".into(),
                },
                groups: match &c.group_base {
                    Some(base) => format!("searched under {base}"),
                    None => format!("the user's {} attribute", c.group_attribute),
                },
                mapped_groups: c.group_roles.len(),
                default_roles: c.default_roles.clone(),
                answer: answer.map(|()| started.elapsed()),
            }
        });
        futures_util::future::join_all(checks).await
    }

    /// Looks up a user of `source` (`ldap:<name>`) with the service account.
    pub async fn recheck(&self, source: &str, username: &str) -> Result<Recheck, DirectoryError> {
        let Some(dir) = self.dirs.iter().find(|d| d.source == source) else {
            // The directory is no longer configured: nobody vouches for its users.
            return Ok(Recheck::Gone);
        };
        if dir.cfg.bind_dn.is_none() {
            return Ok(Recheck::Unknowable);
        }
        match dir.lookup(username).await {
            // The filter must find the user by the name recorded here; another entry (the
            // name's spelling changed, a filter on another attribute) is not this user.
            Ok(Some(u)) if u.username == username => Ok(Recheck::Present(u)),
            Ok(Some(u)) => {
                tracing::warn!(user = %username, found = %u.username, directory = %dir.cfg.name, "the directory's entry no longer has the user's name; the user_filter must match on username_attribute");
                Ok(Recheck::Gone)
            }
            Ok(None) => Ok(Recheck::Gone),
            Err(e) => {
                tracing::warn!(directory = %dir.cfg.name, url = %dir.cfg.url, error = %e, "LDAP directory unavailable");
                Err(DirectoryError::Unavailable)
            }
        }
    }
}

/// A directory's configuration and whether it answered ([`Directories::health`]).
#[derive(Debug, Clone)]
pub struct DirectoryHealth {
    pub name: String,
    pub url: String,
    pub transport: &'static str,
    pub mode: String,
    pub groups: String,
    /// How many groups map to roles.
    pub mapped_groups: usize,
    pub default_roles: Vec<String>,
    /// How long it took to answer, or why it did not.
    pub answer: Result<Duration, String>,
}

enum Outcome {
    User(DirectoryUser),
    /// The directory has the user and refused the password.
    Refused,
    /// The directory has no such user.
    Unknown,
}

/// One connection, closed when dropped (after an unbind when it went well).
struct Conn {
    ldap: ldap3::Ldap,
    timeout: Duration,
}

impl Conn {
    async fn bind(&mut self, dn: &str, password: &str) -> Result<u32, String> {
        let res = self.ldap.with_timeout(self.timeout).simple_bind(dn, password).await.map_err(describe)?;
        Ok(res.rc)
    }

    async fn search(
        &mut self,
        base: &str,
        scope: Scope,
        filter: &str,
        attrs: &[&str],
    ) -> Result<Vec<SearchEntry>, String> {
        let res =
            self.ldap.with_timeout(self.timeout).search(base, scope, filter, attrs.to_vec()).await.map_err(describe)?;
        // 32: no such object (the base itself is missing), which for a lookup means "not here".
        if res.1.rc == 32 {
            return Ok(Vec::new());
        }
        let (entries, _) = res.success().map_err(describe)?;
        Ok(entries.into_iter().map(SearchEntry::construct).collect())
    }

    async fn close(mut self) {
        let _ = self.ldap.unbind().await;
    }
}

fn describe(e: LdapError) -> String {
    match e {
        LdapError::LdapResult { result } => format!("LDAP result {}: {}", result.rc, result.text),
        other => other.to_string(),
    }
}

impl Directory {
    async fn connect(&self) -> Result<Conn, String> {
        let settings = LdapConnSettings::new()
            .set_conn_timeout(Duration::from_millis(self.cfg.connect_timeout_ms))
            .set_starttls(self.cfg.starttls)
            .set_config(self.tls.clone());
        let (conn, ldap) = tokio::time::timeout(
            Duration::from_millis(self.cfg.connect_timeout_ms.saturating_add(self.cfg.timeout_ms)),
            LdapConnAsync::with_settings(settings, &self.cfg.url),
        )
        .await
        .map_err(|_| "timeout: connecting took too long".to_string())?
        .map_err(|e| format!("connection: {}", describe(e)))?;
        ldap3::drive!(conn);
        Ok(Conn { ldap, timeout: Duration::from_millis(self.cfg.timeout_ms) })
    }

    fn attrs(&self) -> Vec<&str> {
        let c = &self.cfg;
        let mut a = vec![c.username_attribute.as_str(), c.email_attribute.as_str(), c.display_name_attribute.as_str()];
        if c.group_base.is_none() {
            a.push(c.group_attribute.as_str());
        }
        a
    }

    fn user_filter(&self, username: &str) -> String {
        self.cfg.user_filter.replace(USERNAME, &ldap_escape(username))
    }

    /// Binds as the service account; a refusal is a configuration error, not the user's.
    async fn service_bind(&self, conn: &mut Conn) -> Result<(), String> {
        let (Some(dn), Some(pw)) = (&self.cfg.bind_dn, &self.bind_password) else {
            return Err("no service account".into());
        };
        match conn.bind(dn, pw).await? {
            0 => Ok(()),
            rc => {
                Err(format!("the service account {dn} cannot bind (LDAP result {rc}): check bind_dn and its password"))
            }
        }
    }

    async fn authenticate(&self, username: &str, password: &str) -> Result<Outcome, String> {
        let mut conn = self.connect().await?;
        let outcome = if self.cfg.bind_dn.is_some() {
            self.search_then_bind(&mut conn, username, password).await
        } else {
            self.direct_bind(&mut conn, username, password).await
        };
        conn.close().await;
        outcome
    }

    async fn search_then_bind(&self, conn: &mut Conn, username: &str, password: &str) -> Result<Outcome, String> {
        self.service_bind(conn).await?;
        let Some(entry) = self.find(conn, username).await? else { return Ok(Outcome::Unknown) };
        let groups = self.groups(conn, &entry).await?;
        match conn.bind(&entry.dn, password).await? {
            0 => Ok(self.outcome(&entry, groups)),
            INVALID_CREDENTIALS => Ok(Outcome::Refused),
            rc => Err(format!("binding as {} gave LDAP result {rc}", entry.dn)),
        }
    }

    async fn direct_bind(&self, conn: &mut Conn, username: &str, password: &str) -> Result<Outcome, String> {
        let Some(template) = &self.cfg.user_dn_template else { return Err("no user_dn_template".into()) };
        let dn = template.replace(USERNAME, &dn_escape(username));
        match conn.bind(&dn, password).await? {
            0 => {}
            // Without a service account "no such user" and "wrong password" look alike.
            INVALID_CREDENTIALS => return Ok(Outcome::Unknown),
            rc => return Err(format!("binding as {dn} gave LDAP result {rc}")),
        }
        // Bound as the user: read their own entry, which must still match the user filter.
        let filter = self.user_filter(username);
        let mut found = conn.search(&dn, Scope::Base, &filter, &self.attrs()).await?;
        let Some(entry) = found.pop() else { return Ok(Outcome::Refused) };
        let groups = self.groups(conn, &entry).await?;
        Ok(self.outcome(&entry, groups))
    }

    /// The one entry the user filter finds for `username` under the user base.
    async fn find(&self, conn: &mut Conn, username: &str) -> Result<Option<SearchEntry>, String> {
        let mut found =
            conn.search(&self.cfg.user_base, Scope::Subtree, &self.user_filter(username), &self.attrs()).await?;
        match found.len() {
            0 => Ok(None),
            1 => Ok(found.pop()),
            n => Err(format!("the user filter finds {n} entries for {username:?}; it must find one")),
        }
    }

    /// With the service account: the user now, or `None` if the filter no longer finds them.
    async fn lookup(&self, username: &str) -> Result<Option<DirectoryUser>, String> {
        let mut conn = self.connect().await?;
        let result = async {
            self.service_bind(&mut conn).await?;
            let Some(entry) = self.find(&mut conn, username).await? else { return Ok(None) };
            let groups = self.groups(&mut conn, &entry).await?;
            match self.user(&entry, groups) {
                Ok(u) => Ok(Some(u)),
                Err(why) => {
                    tracing::warn!(directory = %self.cfg.name, "{why}; the user is treated as gone");
                    Ok(None)
                }
            }
        }
        .await;
        conn.close().await;
        result
    }

    /// The DNs of the user's groups: the entry's `group_attribute`, or a search under
    /// `group_base`.
    async fn groups(&self, conn: &mut Conn, entry: &SearchEntry) -> Result<Vec<String>, String> {
        match &self.cfg.group_base {
            None => Ok(attr(entry, &self.cfg.group_attribute).to_vec()),
            Some(base) => {
                let filter = self.cfg.group_filter.replace(USER_DN, &ldap_escape(&entry.dn));
                // "1.1": no attributes, the DNs only (RFC 4511).
                let found = conn.search(base, Scope::Subtree, &filter, &["1.1"]).await?;
                Ok(found.into_iter().map(|g| g.dn).collect())
            }
        }
    }

    /// A proven password's outcome: the user, or a refusal when the entry names nobody (a
    /// directory that answers is not "unavailable", and a later one must not claim the name).
    fn outcome(&self, entry: &SearchEntry, groups: Vec<String>) -> Outcome {
        match self.user(entry, groups) {
            Ok(u) => Outcome::User(u),
            Err(why) => {
                tracing::warn!(directory = %self.cfg.name, "{why}; the sign-in is refused");
                Outcome::Refused
            }
        }
    }

    /// The user an entry describes. Its name is the directory's spelling (`uid` matches
    /// case-insensitively): one user here however it was typed. An entry without the name's
    /// attribute names nobody.
    fn user(&self, entry: &SearchEntry, groups: Vec<String>) -> Result<DirectoryUser, String> {
        let first = |name: &str| attr(entry, name).first().cloned().filter(|v| !v.is_empty());
        let username = first(&self.cfg.username_attribute).ok_or_else(|| {
            format!("the entry {} has no {} (username_attribute)", entry.dn, self.cfg.username_attribute)
        })?;
        let roles = self.roles(&groups);
        Ok(DirectoryUser {
            username,
            source: self.source.clone(),
            external_id: Some(entry.dn.clone()),
            email: first(&self.cfg.email_attribute),
            display_name: first(&self.cfg.display_name_attribute),
            groups,
            roles,
        })
    }

    /// `default_roles`, plus the roles of every group matched by DN or by name.
    fn roles(&self, groups: &[String]) -> Vec<String> {
        let names = groups.iter().flat_map(|dn| [dn.clone(), group_name(dn)]);
        mapped_roles(&self.cfg.group_roles, &self.cfg.default_roles, names)
    }
}

/// An attribute's values, its name matched case-insensitively.
fn attr<'a>(entry: &'a SearchEntry, name: &str) -> &'a [String] {
    entry.attrs.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_slice()).unwrap_or(&[])
}

/// A group's name: the value of its DN's first component (`cn=repo-devs,ou=groups,…` →
/// `repo-devs`).
fn group_name(dn: &str) -> String {
    let first = split_first_rdn(dn);
    let value = first.split_once('=').map(|(_, v)| v).unwrap_or(first);
    dn_unescape(value.trim())
}

/// Undoes a DN value's escapes: `\,` → `,` and `\2C` → `,` (RFC 4514).
fn dn_unescape(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 1 < bytes.len() {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match hex {
                Some(b) => {
                    out.push(b);
                    i += 3;
                }
                None => {
                    out.push(bytes[i + 1]);
                    i += 2;
                }
            }
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The first RDN of a DN, honouring backslash escapes.
fn split_first_rdn(dn: &str) -> &str {
    let mut escaped = false;
    for (i, c) in dn.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            ',' | '+' if !escaped => return &dn[..i],
            _ => escaped = false,
        }
    }
    dn
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_from_dns() {
        assert_eq!(group_name("cn=repo-devs,ou=groups,dc=example,dc=org"), "repo-devs");
        assert_eq!(group_name("CN=Repo Admins,OU=Groups,DC=corp"), "Repo Admins");
        assert_eq!(group_name(r"cn=a\,b,ou=groups"), "a,b");
        assert_eq!(group_name("cn=x+uid=y,ou=g"), "x");
        assert_eq!(group_name(r"cn=caf\C3\A9\2C,ou=g"), "café,");
    }

    #[test]
    fn roles_by_name_or_dn_case_insensitively() -> anyhow::Result<()> {
        let cfg = LdapDirectory {
            name: "corp".into(),
            url: "ldap://127.0.0.1:389".into(),
            user_dn_template: Some("uid={username},ou=people".into()),
            group_roles: [
                ("REPO-ADMINS".to_string(), vec!["admin".to_string()]),
                (
                    "cn=repo-devs,ou=groups,dc=example,dc=org".to_string(),
                    vec!["deployer".to_string(), "reader".to_string()],
                ),
            ]
            .into(),
            default_roles: vec!["reader".into()],
            ..LdapDirectory::default()
        };
        let dirs = Directories::new(&[cfg])?;
        let d = &dirs.dirs[0];
        assert_eq!(
            d.roles(&[
                "cn=repo-admins,ou=groups,dc=example,dc=org".into(),
                "CN=Repo-Devs,OU=Groups,DC=Example,DC=Org".into()
            ]),
            vec!["admin", "deployer", "reader"]
        );
        assert_eq!(d.roles(&["cn=other,ou=groups".into()]), vec!["reader"]);
        Ok(())
    }
}
