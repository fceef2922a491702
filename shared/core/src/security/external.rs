//! What LDAP directories and the OIDC provider have in common: the identity they vouch for, and
//! how its groups become roles.

use std::collections::BTreeMap;

/// A user someone else vouched for: their name here, attributes, groups and mapped roles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalIdentity {
    pub username: String,
    /// `ldap:<directory>` or `oidc`.
    pub source: String,
    /// Who the source says it is beyond the name: an LDAP entry's DN, an OIDC `iss` and `sub`.
    pub external_id: Option<String>,
    pub email: Option<String>,
    pub display_name: Option<String>,
    /// The groups as the source names them (an LDAP group's DN, an OIDC claim's values).
    pub groups: Vec<String>,
    pub roles: Vec<String>,
}

/// `defaults` plus the roles of every mapping key that one of `names` equals, without regard to
/// case; sorted, each once.
pub fn mapped_roles<S: AsRef<str>>(
    mapping: &BTreeMap<String, Vec<String>>,
    defaults: &[String],
    names: impl IntoIterator<Item = S>,
) -> Vec<String> {
    let mut roles = defaults.to_vec();
    let names: Vec<String> = names.into_iter().map(|n| n.as_ref().to_lowercase()).collect();
    for (key, granted) in mapping {
        if names.contains(&key.to_lowercase()) {
            roles.extend(granted.iter().cloned());
        }
    }
    roles.sort();
    roles.dedup();
    roles
}

/// Whether a source's name for a user can be a Packyard user name (as the users API asks:
/// `[A-Za-z0-9._@-]{1,64}`).
pub fn usable_username(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._@-".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_from_groups() {
        let mapping: BTreeMap<String, Vec<String>> = [
            ("Repo-Admins".to_string(), vec!["admin".to_string()]),
            ("devs".to_string(), vec!["deployers".to_string(), "readers".to_string()]),
        ]
        .into();
        let defaults = vec!["readers".to_string()];
        assert_eq!(mapped_roles(&mapping, &defaults, ["repo-admins", "devs"]), ["admin", "deployers", "readers"]);
        assert_eq!(mapped_roles(&mapping, &defaults, ["other"]), ["readers"]);
        assert_eq!(mapped_roles(&mapping, &[], Vec::<String>::new()), Vec::<String>::new());
    }

    #[test]
    fn usernames() {
        assert!(usable_username("alice.smith@example.org"));
        assert!(!usable_username("alice smith"));
        assert!(!usable_username(""));
        assert!(!usable_username(&"a".repeat(65)));
    }
}
