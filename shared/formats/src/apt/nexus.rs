//! APT in Nexus's repository API: its `apt` object (`distribution`, and `flat`, which Packyard
//! does not serve) and, for a hosted repository, `aptSigning` (`keypair`: the armored private
//! key to sign with; without it a key is generated, as every APT repository has one). Packyard's
//! own fields (`distributions`, `components`, `architectures`, `signed_by`, …) may be sent in the
//! same `apt` object.

use packyard_core::formats::{NexusSettings, NexusShape};
use packyard_model::repos::RepoType;
use serde_json::{json, Map, Value};

pub struct AptNexus;

impl NexusShape for AptNexus {
    fn read(&self, repo_type: RepoType, body: &Map<String, Value>) -> Result<NexusSettings, String> {
        let mut out = NexusSettings::default();
        if let Some(apt) = body.get("apt").filter(|v| !v.is_null()) {
            let Some(apt) = apt.as_object() else { return Err("apt: an object".into()) };
            let mut block = apt.clone();
            match block.remove("flat") {
                None | Some(Value::Null | Value::Bool(false)) => {}
                Some(Value::Bool(true)) => {
                    return Err("apt.flat: Packyard serves APT repositories with dists/ (flat: false); a flat upstream cannot be proxied".into())
                }
                Some(_) => return Err("apt.flat: a boolean".into()),
            }
            out.block = Some(Value::Object(block));
        }
        if let Some(signing) = body.get("aptSigning").filter(|v| !v.is_null()) {
            let text = |name: &str| signing.get(name).and_then(Value::as_str).filter(|s| !s.trim().is_empty());
            if text("passphrase").is_some() {
                return Err("aptSigning.passphrase: Packyard imports a key without a passphrase; export it unprotected (gpg --export-secret-keys --armor after removing the passphrase) and leave passphrase empty".into());
            }
            if let Some(key) = text("keypair") {
                if repo_type != RepoType::Hosted {
                    return Err("aptSigning: only a hosted repository signs with its own key (a group signs with the key Packyard generates for it)".into());
                }
                out.signing_key = Some(key.to_string());
            }
        }
        Ok(out)
    }

    fn show(&self, repo_type: RepoType, block: &Value) -> Map<String, Value> {
        let mut apt = block.as_object().cloned().unwrap_or_default();
        apt.insert("flat".into(), Value::Bool(false));
        let mut out = Map::new();
        out.insert("apt".into(), Value::Object(apt));
        if repo_type == RepoType::Hosted {
            // The private key is never shown (its public part: `/repository/<name>/gpg.key`).
            out.insert("aptSigning".into(), json!({"keypair": null, "passphrase": null}));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(repo_type: RepoType, body: Value) -> Result<NexusSettings, String> {
        AptNexus.read(repo_type, body.as_object().unwrap_or(&Map::new()))
    }

    #[test]
    fn nexus_fields_become_packyards() {
        let s = read(
            RepoType::Hosted,
            json!({"apt": {"distribution": "bookworm", "components": ["main"]}, "aptSigning": {"keypair": "KEY", "passphrase": ""}}),
        );
        let s = s.unwrap_or_default();
        assert_eq!(s.block, Some(json!({"distribution": "bookworm", "components": ["main"]})));
        assert_eq!(s.signing_key.as_deref(), Some("KEY"));
        let s = read(RepoType::Proxy, json!({"apt": {"distribution": "bookworm", "flat": false}})).unwrap_or_default();
        assert_eq!(s.block, Some(json!({"distribution": "bookworm"})));
        assert!(read(RepoType::Proxy, json!({"apt": {"flat": true}})).is_err_and(|e| e.starts_with("apt.flat")));
        assert!(read(RepoType::Hosted, json!({"aptSigning": {"keypair": "K", "passphrase": "p"}}))
            .is_err_and(|e| e.starts_with("aptSigning.passphrase")));
        let shown = AptNexus.show(RepoType::Hosted, &json!({"distribution": "stable"}));
        assert_eq!(
            Value::Object(shown),
            json!({"apt": {"distribution": "stable", "flat": false}, "aptSigning": {"keypair": null, "passphrase": null}})
        );
    }
}
