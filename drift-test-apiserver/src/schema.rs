//! What the server knows of the shape of objects: which lists are associative (and by which
//! keys), which are sets, which maps are atomic, and the strategic-merge-patch strategy of each.
//!
//! Paths are given as field names from the root of the object, list positions left out
//! (`["spec", "template", "spec", "containers", "ports"]`). The rules are those of the
//! Kubernetes types (`+listType`, `+listMapKey`, `patchStrategy`, `patchMergeKey`) for the
//! fields of the common kinds; any other list is atomic, any other map granular, as for
//! structural schemas without annotations.

/// How a list is merged and tracked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// Replaced as a whole; owned as one field.
    Atomic,
    /// A set of scalars (`v:` entries).
    Set,
    /// An associative list keyed by the given fields (`k:` entries); `merge_key` is the single
    /// key strategic merge patch uses.
    Map {
        /// Keys of `+listMapKey`.
        keys: Vec<&'static str>,
        /// `patchMergeKey`.
        merge_key: &'static str,
    },
}

fn is_container_list(name: &str) -> bool {
    matches!(name, "containers" | "initContainers" | "ephemeralContainers")
}

/// The type of the list at `path` in an object of `kind`.
pub fn list_type(kind: &str, path: &[&str]) -> ListType {
    let n = path.len();
    let last = path.last().copied().unwrap_or("");
    let parent = if n >= 2 { path[n - 2] } else { "" };
    let map = |keys: Vec<&'static str>, merge_key: &'static str| ListType::Map { keys, merge_key };
    match last {
        c if is_container_list(c) => map(vec!["name"], "name"),
        "ports" if is_container_list(parent) => map(vec!["containerPort", "protocol"], "containerPort"),
        "ports" if kind == "Service" && path == ["spec", "ports"] => map(vec!["port", "protocol"], "port"),
        "env" if is_container_list(parent) => map(vec!["name"], "name"),
        "volumeMounts" if is_container_list(parent) => map(vec!["mountPath"], "mountPath"),
        "volumeDevices" if is_container_list(parent) => map(vec!["devicePath"], "devicePath"),
        "resizePolicy" if is_container_list(parent) => map(vec!["resourceName"], "resourceName"),
        "volumes" if parent == "spec" => map(vec!["name"], "name"),
        "imagePullSecrets" => map(vec!["name"], "name"),
        "hostAliases" => map(vec!["ip"], "ip"),
        "topologySpreadConstraints" => map(vec!["topologyKey", "whenUnsatisfiable"], "topologyKey"),
        "resourceClaims" if parent == "spec" => map(vec!["name"], "name"),
        "ownerReferences" if parent == "metadata" => map(vec!["uid"], "uid"),
        "finalizers" if parent == "metadata" => ListType::Set,
        "conditions" if parent == "status" => map(vec!["type"], "type"),
        _ => ListType::Atomic,
    }
}

/// Whether the map at `path` is atomic (owned and replaced as a whole).
pub fn map_is_atomic(_kind: &str, path: &[&str]) -> bool {
    matches!(path.last().copied(), Some("selector" | "podSelector" | "namespaceSelector" | "labelSelector"))
}
