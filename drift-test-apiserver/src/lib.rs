//! A Kubernetes API server for tests, speaking the real REST protocol over HTTP on loopback,
//! that the real `kubectl` and kube-rs can drive.
//!
//! It keeps objects in memory and does on every write what a real API server does: defaulting
//! of the common kinds, canonical resource quantities, uid, a global resourceVersion,
//! generation, creationTimestamp and managedFields per field manager (Update and Apply, with
//! server-side apply conflicts). It serves discovery, list with selectors and pagination,
//! watch with bookmarks and 410 Gone, the four patch types, the status and scale
//! subresources, custom resources once their CRD exists, bearer-token authentication (one
//! token, or named users as in kube-apiserver's `--token-auth-file`), a Kubernetes audit log,
//! simulated mutating admission (rules standing in for webhooks) and injected faults. See `docs/test-apiserver.md` for what it emulates and what it does not.
//!
//! ```no_run
//! use drift_test_apiserver::{Options, TestApiServer};
//!
//! let server = TestApiServer::start(Options::default()).expect("start");
//! println!("kubectl --kubeconfig {} get ns", server.kubeconfig_path().display());
//! // ... run kubectl or a kube::Client against server.url() ...
//! drop(server); // stops it
//! ```
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod admission;
pub mod apply;
pub mod audit;
pub mod crd_schema;
pub mod defaults;
pub mod discovery;
pub mod faults;
pub mod fieldset;
pub mod handlers;
pub mod kubeconfig;
pub mod openapi;
pub mod patch;
pub mod protobuf;
pub mod quantity;
pub mod resources;
pub mod schema;
pub mod selectors;
pub mod server;
pub mod status;
pub mod store;
pub mod table;
pub mod tls;
pub mod validation;
pub mod watch;

pub use admission::{Admission, Mutation, MutationMatch, Operation, SetField};
pub use audit::{AuditLevel, StaticUser};
pub use faults::{FaultAction, FaultMatch, FaultRule, Faults};
pub use server::{Holds, Options, RecordedRequest, StartError, TestApiServer};

/// The current time as the API server writes it (RFC 3339, seconds, UTC).
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The examples of the crate's README.md, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
