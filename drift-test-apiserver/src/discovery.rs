//! Discovery documents in the legacy (non-aggregated) format: `/version`, `/api`, `/api/v1`,
//! `/apis`, `/apis/<group>` and `/apis/<group>/<version>`. Clients that ask for aggregated
//! discovery get these with `Content-Type: application/json` and fall back to them, as they do
//! with servers that do not aggregate.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::resources::{ResourceType, api_resource_json};

/// The server version reported at `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0-drift-test",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `/api`
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// Groups (other than core) with their versions, preferred first.
fn groups(types: &[ResourceType]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in types.iter().filter(|t| !t.group.is_empty()) {
        let vs = out.entry(t.group.clone()).or_default();
        for v in &t.versions {
            if !vs.contains(v) {
                vs.push(v.clone());
            }
        }
    }
    out
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> =
        versions.iter().map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v})).collect();
    json!({
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`
pub fn group_list(types: &[ResourceType]) -> Value {
    let gs: Vec<Value> = groups(types).iter().map(|(g, vs)| group_json(g, vs)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs})
}

/// `/apis/<group>`
pub fn group(types: &[ResourceType], name: &str) -> Option<Value> {
    let gs = groups(types);
    let vs = gs.get(name)?;
    let mut g = group_json(name, vs);
    if let Some(m) = g.as_object_mut() {
        m.insert("kind".into(), json!("APIGroup"));
        m.insert("apiVersion".into(), json!("v1"));
    }
    Some(g)
}

/// `/api/v1` or `/apis/<group>/<version>`
pub fn resource_list(types: &[ResourceType], group: &str, version: &str) -> Option<Value> {
    let matching: Vec<&ResourceType> =
        types.iter().filter(|t| t.group == group && t.versions.iter().any(|v| v == version)).collect();
    if matching.is_empty() {
        return None;
    }
    let resources: Vec<Value> = matching.iter().flat_map(|t| api_resource_json(t, version)).collect();
    let gv = if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }))
}
