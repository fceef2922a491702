//! Directory sign-in settings: the LDAP directories (`[[security.ldap]]`), asked in order for
//! users who are not local.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The placeholder for the name a person signs in with, in `user_filter` and `user_dn_template`.
pub const USERNAME: &str = "{username}";
/// The placeholder for the user's DN, in `group_filter`.
pub const USER_DN: &str = "{dn}";

/// One LDAP directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LdapDirectory {
    /// Names the directory in the log, the audit log and the users list (`ldap:<name>`).
    pub name: String,
    /// `ldaps://host:636` (TLS from the start) or `ldap://host:389` (with `starttls`).
    pub url: String,
    /// Upgrade an `ldap://` connection with StartTLS before anything is sent.
    pub starttls: bool,
    /// Allow `ldap://` without StartTLS, which sends passwords in the clear.
    pub allow_plaintext: bool,
    /// PEM file of the CA(s) that signed the directory's certificate, besides the public roots.
    pub ca_file: Option<PathBuf>,
    pub connect_timeout_ms: u64,
    /// The longest one directory operation may take.
    pub timeout_ms: u64,
    /// The service account that searches for users (search mode). Unset: direct bind with
    /// `user_dn_template`.
    pub bind_dn: Option<String>,
    pub bind_password: Option<String>,
    /// A file holding the service account's password (a Kubernetes secret), instead of
    /// `bind_password`.
    pub bind_password_file: Option<PathBuf>,
    /// Where users are searched (search mode), subtree.
    pub user_base: String,
    /// Which entry is the user: `{username}` is replaced by the escaped name. Users it does not
    /// match cannot sign in (a way to shut out disabled accounts).
    pub user_filter: String,
    /// Direct bind: the user's DN, `{username}` replaced by the escaped name.
    pub user_dn_template: Option<String>,
    /// The attribute that holds the user name (its value becomes the Packyard user's name).
    pub username_attribute: String,
    pub email_attribute: String,
    pub display_name_attribute: String,
    /// The user entry's attribute listing the DNs of the user's groups (`memberOf`).
    pub group_attribute: String,
    /// Set: groups are searched under this base instead, with `group_filter` (`{dn}` is the
    /// user's DN). A group's name is the value of its DN's first part (`cn=devs,…` → `devs`).
    pub group_base: Option<String>,
    pub group_filter: String,
    /// Group (by name or by DN, case-insensitive) → Packyard roles.
    pub group_roles: BTreeMap<String, Vec<String>>,
    /// Roles every user of this directory gets.
    pub default_roles: Vec<String>,
}

impl Default for LdapDirectory {
    fn default() -> Self {
        Self {
            name: String::new(),
            url: String::new(),
            starttls: false,
            allow_plaintext: false,
            ca_file: None,
            connect_timeout_ms: 5_000,
            timeout_ms: 10_000,
            bind_dn: None,
            bind_password: None,
            bind_password_file: None,
            user_base: String::new(),
            user_filter: "(&(objectClass=inetOrgPerson)(uid={username}))".into(),
            user_dn_template: None,
            username_attribute: "uid".into(),
            email_attribute: "mail".into(),
            display_name_attribute: "cn".into(),
            group_attribute: "memberOf".into(),
            group_base: None,
            group_filter: "(&(objectClass=groupOfNames)(member={dn}))".into(),
            group_roles: BTreeMap::new(),
            default_roles: Vec::new(),
        }
    }
}

impl LdapDirectory {
    /// The rules serde cannot express; `index` places the directory in `security.ldap`.
    pub fn validate(&self, index: usize, all: &[LdapDirectory]) -> Result<(), String> {
        let key = |k: &str| format!("security.ldap[{index}].{k}");
        let bad = |k: &str, why: &str| format!("bad value for key `{}`: {why}", key(k));
        if self.name.is_empty()
            || !self.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            || self.name.len() > 32
        {
            return Err(bad("name", "use 1 to 32 letters, digits, '-' or '_'"));
        }
        if all[..index].iter().any(|d| d.name == self.name) {
            return Err(bad("name", &format!("{:?} names two directories", self.name)));
        }
        let url = url::Url::parse(&self.url).map_err(|e| bad("url", &format!("{:?} is not a URL ({e})", self.url)))?;
        match url.scheme() {
            "ldaps" if self.starttls => {
                return Err(bad("starttls", "StartTLS is for ldap:// URLs; ldaps:// is TLS already"))
            }
            "ldap" if !self.starttls && !self.allow_plaintext => {
                return Err(bad(
                    "starttls",
                    "ldap:// without StartTLS sends passwords in the clear: set starttls = true, use ldaps://, or set allow_plaintext = true",
                ))
            }
            "ldaps" | "ldap" if url.host_str().is_some() => {}
            _ => return Err(bad("url", &format!("{:?} must be ldaps://host[:port] or ldap://host[:port]", self.url))),
        }
        if let Some(ca) = &self.ca_file {
            if !ca.is_file() {
                return Err(bad("ca_file", &format!("{} is not a file", ca.display())));
            }
        }
        if self.connect_timeout_ms == 0 || self.timeout_ms == 0 {
            return Err(bad("timeout_ms", "timeouts must be positive"));
        }
        match (&self.bind_dn, &self.user_dn_template) {
            (Some(dn), _) => {
                if dn.is_empty() {
                    return Err(bad("bind_dn", "must not be empty (an empty DN binds anonymously)"));
                }
                match (&self.bind_password, &self.bind_password_file) {
                    (Some(p), None) if !p.is_empty() => {}
                    (None, Some(f)) if f.is_file() => {}
                    (None, Some(f)) => return Err(bad("bind_password_file", &format!("{} is not a file", f.display()))),
                    _ => {
                        return Err(bad(
                            "bind_password",
                            "set exactly one of bind_password and bind_password_file (not empty: an empty password binds anonymously)",
                        ))
                    }
                }
                if self.user_base.is_empty() {
                    return Err(bad("user_base", "the service account searches under it: set it"));
                }
                if !self.user_filter.contains(USERNAME) {
                    return Err(bad("user_filter", "must contain {username}"));
                }
            }
            (None, Some(template)) => {
                if !template.contains(USERNAME) {
                    return Err(bad("user_dn_template", "must contain {username}"));
                }
            }
            (None, None) => {
                return Err(bad(
                    "bind_dn",
                    "set bind_dn (search with a service account) or user_dn_template (direct bind)",
                ))
            }
        }
        if self.group_base.is_some() && !self.group_filter.contains(USER_DN) {
            return Err(bad("group_filter", "must contain {dn}"));
        }
        Ok(())
    }

    /// `ldap:<name>`: the source recorded on the directory's users.
    pub fn source(&self) -> String {
        format!("ldap:{}", self.name)
    }
}

/// Sign-in to the web UI through an OpenID Connect provider (`[security.oidc]`); off while
/// `issuer` is unset.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OidcConfig {
    /// The provider's issuer URL; its `/.well-known/openid-configuration` is read at the first
    /// sign-in (and again hourly).
    pub issuer: Option<String>,
    pub client_id: String,
    pub client_secret: Option<String>,
    /// A file holding the client secret, instead of `client_secret`.
    pub client_secret_file: Option<PathBuf>,
    /// Scopes asked for besides `openid`.
    pub scopes: Vec<String>,
    /// The ID token claim whose value becomes the Packyard user's name.
    pub username_claim: String,
    /// The ID token claim listing the user's groups (a list of strings, or one string).
    pub groups_claim: String,
    /// Group (a value of `groups_claim`, case-insensitive) → Packyard roles.
    pub group_roles: BTreeMap<String, Vec<String>>,
    /// Roles every user signed in through the provider gets.
    pub default_roles: Vec<String>,
    /// The sign-in page's button.
    pub button_label: String,
    /// PEM file of the CA(s) that signed the provider's certificate, besides the public roots.
    pub ca_file: Option<PathBuf>,
    /// The longest one request to the provider may take.
    pub timeout_ms: u64,
}

impl Default for OidcConfig {
    fn default() -> Self {
        Self {
            issuer: None,
            client_id: String::new(),
            client_secret: None,
            client_secret_file: None,
            scopes: vec!["profile".into(), "email".into()],
            username_claim: "preferred_username".into(),
            groups_claim: "groups".into(),
            group_roles: BTreeMap::new(),
            default_roles: Vec::new(),
            button_label: "Sign in with single sign-on".into(),
            ca_file: None,
            timeout_ms: 10_000,
        }
    }
}

/// `users.source` of users signed in through the OIDC provider.
pub const OIDC_SOURCE: &str = "oidc";

impl OidcConfig {
    pub fn enabled(&self) -> bool {
        self.issuer.is_some()
    }

    pub fn validate(&self) -> Result<(), String> {
        let Some(issuer) = &self.issuer else { return Ok(()) };
        let bad = |k: &str, why: &str| format!("bad value for key `security.oidc.{k}`: {why}");
        let url = url::Url::parse(issuer).map_err(|e| bad("issuer", &format!("{issuer:?} is not a URL ({e})")))?;
        let loopback = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
        match url.scheme() {
            "https" => {}
            "http" if loopback => {}
            _ => return Err(bad("issuer", &format!("{issuer:?} must be an https:// URL (http:// only on loopback)"))),
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(bad("issuer", "must not carry a query or a fragment"));
        }
        if self.client_id.is_empty() {
            return Err(bad("client_id", "set the client id the provider gave Packyard"));
        }
        match (&self.client_secret, &self.client_secret_file) {
            (Some(s), None) if !s.is_empty() => {}
            (None, Some(f)) if f.is_file() => {}
            (None, Some(f)) => return Err(bad("client_secret_file", &format!("{} is not a file", f.display()))),
            _ => return Err(bad("client_secret", "set exactly one of client_secret and client_secret_file")),
        }
        if self.username_claim.is_empty() {
            return Err(bad("username_claim", "must not be empty"));
        }
        if let Some(ca) = &self.ca_file {
            if !ca.is_file() {
                return Err(bad("ca_file", &format!("{} is not a file", ca.display())));
            }
        }
        if self.timeout_ms == 0 {
            return Err(bad("timeout_ms", "must be positive"));
        }
        Ok(())
    }
}
