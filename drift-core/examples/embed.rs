//! Embedding the engine: compare a manifest from Git with the object a cluster returned.
//! `cargo run -p drift-core --example embed`
use drift_core::{Comparator, Engine, manifest::parse_manifests};

fn main() {
    let git = parse_manifests(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 3}\n",
        "git.yaml",
    );
    let live = parse_manifests(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, uid: u1}\nspec: {replicas: 5}\n",
        "live.yaml",
    );
    for drift in Engine::default().compare(&git.resources[0], live.resources.first()) {
        println!(
            "{} {} {}: git {:?}, cluster {:?}",
            drift.severity, drift.drift_type, drift.path, drift.git_value, drift.cluster_value
        );
    }
}
