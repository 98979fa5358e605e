//! # drift-manifest
//!
//! Kubernetes manifests read the way the drift detector compares them: YAML (block and flow,
//! several documents, `List`s) and JSON documents into [`Resource`](drift_model::Resource)s
//! with their file, document and line ([`parse`]); a live object that is only compared read into
//! a [`Tree`](drift_model::tree::Tree) borrowing its text ([`read_live_tree`]); desired objects
//! kept compact until each is compared ([`KeptResource`]); SOPS-encrypted files opened in place
//! through the model's [`SopsOpener`](drift_model::sops::SopsOpener) ([`sops::open_file`]).
//!
//! Pure: it reads text it is given, never a file or the network. It depends on `drift-model`
//! only; `drift-core` re-exports it as `drift_manifest`.
//!
//! ```
//! let parsed = drift_manifest::parse_manifests(
//!     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: shop}\ndata: {a: '1'}\n",
//!     "web.yaml",
//! );
//! assert!(parsed.warnings.is_empty());
//! assert_eq!(parsed.resources[0].key.name, "web");
//! ```
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod build;
mod json_tree;
pub mod kept;
pub mod parse;
mod resolve;
pub mod sops;
mod swar;
mod value_bytes;
pub mod walk;
mod yaml;
mod yaml_lines;

pub use kept::KeptResource;
pub use parse::*;

/// The examples of the crate's README.md, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
