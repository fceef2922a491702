//! Conan in Nexus's repository API: a proxy's `conanProxy.conanVersion` (Packyard serves the
//! Conan 2 protocol: `V2`, or nothing).

use packyard_core::formats::{NexusSettings, NexusShape};
use packyard_model::repos::RepoType;
use serde_json::{json, Map, Value};

pub struct ConanNexus;

impl NexusShape for ConanNexus {
    fn read(&self, _repo_type: RepoType, body: &Map<String, Value>) -> Result<NexusSettings, String> {
        let version = body.get("conanProxy").and_then(|p| p.get("conanVersion")).filter(|v| !v.is_null());
        match version.map(|v| v.as_str().unwrap_or_default()) {
            None | Some("V2") => {}
            Some(v) => {
                return Err(format!("conanProxy.conanVersion {v:?}: Packyard serves the Conan 2 protocol only (V2)"))
            }
        }
        Ok(NexusSettings { block: body.get("conan").filter(|v| !v.is_null()).cloned(), signing_key: None })
    }

    fn show(&self, repo_type: RepoType, block: &Value) -> Map<String, Value> {
        let mut out = Map::new();
        if !block.is_null() {
            out.insert("conan".into(), block.clone());
        }
        if repo_type == RepoType::Proxy {
            out.insert("conanProxy".into(), json!({"conanVersion": "V2"}));
        }
        out
    }
}
