//! # drift-kube
//!
//! Live state from Kubernetes for the drift detector:
//!
//! - [`K8sSource`], a [`drift_model::LiveSource`] on kube-rs: a client from a kubeconfig (file and
//!   context) or the in-cluster service account; discovery of each kind in scope (resource,
//!   preferred version, namespaced or not); paginated lists (`limit`/`continue`) of exactly the
//!   (kind, namespace) pairs asked, with bounded concurrency; 429 and 5xx retried with a
//!   backoff that honours `Retry-After`; and coverage for every pair: `complete`, `forbidden`
//!   (403), `not_served` (404, unknown kind) or `failed`. Objects are kept as the API server
//!   returns them, managedFields included: the source never normalises.
//! - Watch mode ([`K8sSource::start_watch`], [`K8sWatch`]): kube-runtime watchers, a compact
//!   cache, change events, relists after 410 Gone and errors, and `Desynced`/`Synced` events.
//! - Server-side mode ([`K8sSource::predict`], [`K8sSource::review_server_side`]): a
//!   server-side apply dry run predicts the live object, so that defaults and mutating webhooks
//!   are not mistaken for drift.
//! - Revert ([`K8sSource::send_revert`], [`K8sSource::get_object`]): a revert plan of
//!   `drift_model::remedy` sent to the cluster, guarded removals then a server-side apply of Git's
//!   values with the field manager `drift-detector`.
//! - Leader election ([`KubeLease`]): the replicas of a detector share a
//!   `coordination.k8s.io/v1` Lease; updates carry its `resourceVersion`, so two never both lead.
//! - Credentials from Secrets ([`credentials`]): an Argo CD cluster Secret or a Flux kubeconfig
//!   Secret, from a file or the home cluster, as a kubeconfig for
//!   [`K8sSource::connect_kubeconfig`]; errors name keys, never values.
//! - [`SnapshotSource`], live state from files (`kubectl get -A -o yaml`), for offline use.
//! - Snapshot folders are walked by `drift_manifest::walk`, the one walker of manifest folders
//!   on the local disk (also the folders of `drift diff`): links only inside the root and never
//!   in a cycle, regular files only, bounded in files and bytes.
//!
//! The TLS crypto provider is the program's choice, never this library's: a binary installs
//! rustls' process-level provider in `main`, before [`K8sSource::connect`] (the `drift` binary
//! installs ring: `rustls::crypto::ring::default_provider().install_default()`). kube-rs builds
//! its TLS configuration from that provider; when none is installed, rustls takes the only one
//! the program's dependencies compile in, and fails if they compile in two.
//!
//! ```no_run
//! use drift_model::{GroupKind, LiveSource, Scope};
//! use drift_kube::{K8sConfig, K8sSource};
//!
//! # async fn run() -> drift_model::Result<()> {
//! let config = K8sConfig { context: Some("prod".into()), ..K8sConfig::default() };
//! let source = K8sSource::connect(config).await?;
//! let mut scope = Scope::default();
//! scope.insert(GroupKind::new("apps", "Deployment"), Some("shop".into()));
//! let snapshot = source.fetch(&scope).await?;
//! for entry in snapshot.coverage.incomplete() {
//!     eprintln!("not read: {} {:?}: {}", entry.kind, entry.namespace, entry.status.label());
//! }
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

pub mod client;
pub mod config;
pub mod credentials;
pub mod error;
pub mod lease;
pub mod lookup;
pub mod revert;
pub mod server_side;
pub mod snapshot;
pub mod source;
pub mod watch;

pub use config::{K8sConfig, live_source_from_config};
pub use credentials::{Credentials, SecretFormat, SecretRef};
pub use error::K8sError;
pub use lease::{KubeLease, KubeMembers};
pub use lookup::ClusterLookup;
pub use snapshot::SnapshotSource;
pub use source::{Discovered, K8sSource, KindInfo, Rotation};
pub use watch::{CacheStats, K8sWatch, cache_form};

/// Locks a mutex, going on with the data if another thread panicked while holding it.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The examples of the crate's README.md, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
