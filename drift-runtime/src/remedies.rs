//! Acting on a drift, both directions (docs/remediation.md):
//!
//! - **revert** ([`Remedies::revert`]): the cluster back to Git. The drift is read from the store,
//!   the safety rules refuse what must not be touched, the object is read fresh from Git and
//!   from the cluster and compared again, and the plan of only the drifted field
//!   ([`drift_core::remedy::revert_plan`]) goes to the cluster as a dry run first, then for real
//!   when the dry run shows the intended change. The next scan or watch event resolves the drift
//!   as `reverted`.
//! - **accept** ([`Remedies::accept`]): Git to the cluster. The cluster's values of the object's
//!   drifts go to the repository's [`ChangeProposer`], which places them in the desired source and
//!   opens (or updates) a pull request. After the merge, the next scan resolves them as
//!   `accepted`.
//! - **self-heal** ([`Remedies::heal_round`], [`run_heal`]): opt-in reverts of the drifts a
//!   [`HealPolicy`] names, after a grace period, under a rate limit; a `reject` decision makes a
//!   drift a candidate at once.
//!
//! Every revert and accept, done, dry-run or refused, is written to the audit trail with who
//! asked. Secret values are never written there, nor in answers. A revert or an accept that
//! may write writes an `attempted` entry before it acts and its outcome after, naming the
//! attempt ([`crate::attempt`]): it finishes, or is given up at its timeout (`failed`), or is
//! stopped after the shutdown grace ([`Remedies::drain`]: `interrupted`); a process killed
//! mid-action leaves its `attempted` entry, closed as `interrupted` by the next start
//! ([`Remedies::close_interrupted`]). The git processes an accept runs belong to it: they are
//! stopped with it.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use drift_core::act::{ATTEMPTED, AuditAction, AuditFilter, AuditNote};
use drift_core::diff::lookup;
use drift_core::remedy::{
    AcceptOutcome, ChangeProposer, ChangeRequest, ClusterWriter, Fault, FieldChange, Refusal, RevertOutcome,
    RevertStatus, revert_plan,
};
use drift_core::sink::{DriftFilter, DriftStatus, PageRequest, StoredDrift};
use drift_core::{ActStore, Classification, DecisionSource, DriftType, Resource, ResourceKey, Severity};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::attempt::{ACTION_TIMEOUT, Runner};
use crate::scanner::Scanner;

mod auto;
mod proposals;

pub use auto::{AUTO_ACTOR, AutoAcceptPolicy, AutoRound, AutoRule, run_auto_accept};
pub use proposals::{
    PROPOSE_ACTOR, Pattern, ProposePolicy, ProposeRound, WhitelistProposal, pointer_of, proposal_body, run_proposals,
};

/// The actor of self-heal's reverts in the audit trail.
pub const HEAL_ACTOR: &str = "heal";

/// What self-heal may revert, and how fast (drift.yaml `heal:`). Empty lists allow everything;
/// the defaults heal manual and unknown changes of any namespace, type and severity, ten an hour, after ten
/// minutes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealPolicy {
    /// Only write what would be done to the audit trail (`would_revert`); send nothing but the
    /// server's dry run.
    pub dry_run: bool,
    /// Only these namespaces (empty: all).
    pub namespaces: Vec<String>,
    /// Only these drift types (empty: all).
    pub drift_types: Vec<DriftType>,
    /// Only these severities (empty: all).
    pub severities: Vec<Severity>,
    /// Only these classifications (default: `manual_change` and `unknown`: a change by a manager
    /// on no list is healed as a change by hand, its name proving nothing). `controller_managed`
    /// is never reverted, whatever this says.
    pub classifications: Vec<Classification>,
    /// A drift is healed only when it is still open and not acknowledged this long after it was
    /// detected (a `reject` decision skips the wait).
    #[serde(with = "humantime_serde")]
    pub grace: Duration,
    /// At most this many reverts per [`HealPolicy::per`] (across every process on the store).
    pub max: u32,
    /// The window of the rate limit.
    #[serde(with = "humantime_serde")]
    pub per: Duration,
    /// How often a round looks for drifts to heal.
    #[serde(with = "humantime_serde")]
    pub tick: Duration,
}

impl Default for HealPolicy {
    fn default() -> Self {
        HealPolicy {
            dry_run: false,
            namespaces: Vec::new(),
            drift_types: Vec::new(),
            severities: Vec::new(),
            classifications: vec![Classification::ManualChange, Classification::Unknown],
            grace: Duration::from_secs(600),
            max: 10,
            per: Duration::from_secs(3600),
            tick: Duration::from_secs(30),
        }
    }
}

impl HealPolicy {
    /// Whether the policy's filters let a drift through (namespaces, types, severities).
    pub fn covers(&self, d: &StoredDrift) -> bool {
        (self.namespaces.is_empty() || self.namespaces.contains(&d.namespace))
            && (self.drift_types.is_empty() || self.drift_types.contains(&d.drift_type))
            && (self.severities.is_empty() || self.severities.contains(&d.severity))
    }

    /// Checks the policy.
    pub fn validate(&self) -> drift_core::Result<()> {
        if self.max == 0 || self.per.is_zero() || self.tick.is_zero() {
            return Err(drift_core::Error::config("heal: max, per and tick must be more than 0"));
        }
        if self.grace < Duration::from_secs(1) {
            // It is also how long a refused or failed drift waits before it is tried again.
            return Err(drift_core::Error::config("heal: grace must be at least 1s"));
        }
        Ok(())
    }
}

/// What one round of self-heal did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HealRound {
    /// Open drifts the policy covers.
    pub candidates: usize,
    /// Reverted.
    pub reverted: usize,
    /// Written as `would_revert` (dry-run mode).
    pub would_revert: usize,
    /// Refused by a safety rule (written to the audit trail once per drift and grace period).
    pub refused: usize,
    /// Failed (the cluster or the store).
    pub failed: usize,
    /// Left for later by the rate limit.
    pub limited: usize,
}

/// The remediation of a detector: its scanner (sources, engine, store), a cluster writer and
/// the proposers of the repositories.
#[derive(Debug, Clone)]
pub struct Remedies {
    scanner: Arc<Scanner>,
    writer: Option<Arc<dyn ClusterWriter>>,
    /// Accepts take the cluster's values from the store (what the last scan recorded) instead
    /// of reading the cluster: `drift fix --accept` where no cluster can be reached.
    recorded: bool,
    proposers: Vec<Arc<dyn ChangeProposer>>,
    allow_secrets: bool,
    heal: Option<HealPolicy>,
    /// Automatic pull requests ([`Remedies::with_auto_accept`]).
    auto_accept: Option<AutoAcceptPolicy>,
    link: Option<String>,
    /// How long an action may run ([`Remedies::with_timeout`]).
    timeout: Duration,
    /// Set when running actions must stop now ([`Remedies::drain`]).
    stop_now: watch::Sender<bool>,
    /// How many actions run now.
    running: watch::Sender<usize>,
    /// The cluster value each drift had when this process last proposed it automatically
    /// ([`auto`]): a drift whose value moves on is proposed again.
    auto_proposed: Arc<std::sync::Mutex<std::collections::HashMap<i64, Option<serde_json::Value>>>>,
    /// The classifier (`classify:`), for the rules of automatic pull requests that ask for its
    /// prediction ([`Remedies::with_classifier`]).
    classifier: Option<Arc<drift_core::drift_engine::classify::Classifier>>,
    /// Whitelist proposals ([`Remedies::with_propose`]).
    propose: Option<ProposePolicy>,
}

type Outcome<T> = Result<T, Fault>;

/// How an action ended: it finished (done, refused, failed or timed out), or it was stopped
/// after the shutdown grace.
enum Ended<T> {
    Done(Outcome<T>),
    Interrupted(String),
}

/// Counts a running action until dropped.
struct Running<'a>(&'a watch::Sender<usize>);

impl<'a> Running<'a> {
    fn start(count: &'a watch::Sender<usize>) -> Self {
        count.send_modify(|n| *n += 1);
        Running(count)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

fn object_of(d: &StoredDrift) -> String {
    let gk =
        if d.api_group.is_empty() { d.resource_kind.clone() } else { format!("{}/{}", d.api_group, d.resource_kind) };
    if d.namespace.is_empty() {
        format!("{gk} {}", d.resource_name)
    } else {
        format!("{gk} {}/{}", d.namespace, d.resource_name)
    }
}

fn key_of(d: &StoredDrift) -> ResourceKey {
    ResourceKey::new(
        d.api_group.as_str(),
        d.resource_kind.as_str(),
        (!d.namespace.is_empty()).then_some(d.namespace.as_str()),
        d.resource_name.as_str(),
    )
}

fn is_secret(d: &StoredDrift) -> bool {
    d.api_group.is_empty() && d.resource_kind == "Secret"
}

/// Whether the last decision about the drift is a `reject` (every decision makes the drift's
/// `decision_source` human; only a reject asks for the revert).
async fn rejected(act: &dyn ActStore, d: &StoredDrift) -> drift_core::Result<bool> {
    if d.decision_source != DecisionSource::Human {
        return Ok(false);
    }
    let decisions = act.decisions(d.id).await?;
    Ok(decisions.last().is_some_and(|x| x.action == drift_core::act::DecisionAction::Reject))
}

impl Remedies {
    /// Remediation over a detector's scanner; nothing can be done until a writer or proposers
    /// are given.
    pub fn new(scanner: Arc<Scanner>) -> Self {
        Remedies {
            scanner,
            writer: None,
            recorded: false,
            proposers: Vec::new(),
            allow_secrets: false,
            heal: None,
            auto_accept: None,
            link: None,
            timeout: ACTION_TIMEOUT,
            stop_now: watch::Sender::new(false),
            running: watch::Sender::new(0),
            auto_proposed: Arc::default(),
            classifier: None,
            propose: None,
        }
    }
    /// Turns whitelist proposals on with a policy ([`ProposePolicy`]).
    pub fn with_propose(mut self, policy: ProposePolicy) -> Self {
        self.propose = Some(policy);
        self
    }
    /// The policy of whitelist proposals, when they are on.
    pub fn propose(&self) -> Option<&ProposePolicy> {
        self.propose.as_ref()
    }
    /// The classifier given by [`Remedies::with_classifier`].
    pub fn classifier(&self) -> Option<&Arc<drift_core::drift_engine::classify::Classifier>> {
        self.classifier.as_ref()
    }
    /// The classifier whose predictions the rules of automatic pull requests (`predicted:`)
    /// ask for; without it such a rule matches nothing.
    pub fn with_classifier(mut self, classifier: Arc<drift_core::drift_engine::classify::Classifier>) -> Self {
        self.classifier = Some(classifier);
        self
    }
    /// How long a revert or an accept may run before it is given up and recorded as `failed`
    /// (default [`ACTION_TIMEOUT`]); its git processes are stopped then.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
    /// The cluster writer (reverts need one).
    pub fn with_writer(mut self, writer: Arc<dyn ClusterWriter>) -> Self {
        self.writer = Some(writer);
        self
    }
    /// Adds the proposer of a repository (accepts need one for the drift's repository).
    pub fn with_proposer(mut self, proposer: Arc<dyn ChangeProposer>) -> Self {
        self.proposers.push(proposer);
        self
    }
    /// Accepts propose the cluster's values as the last scan recorded them (the store's
    /// `cluster_value` of each drift), placed in Git's object as it is now, instead of reading
    /// the cluster: for a caller that cannot reach it (`drift fix --accept` without a
    /// kubeconfig). A drift whose field Git no longer has, or whose value Git has taken since,
    /// is left out as for a fresh read. Reverts still need the cluster.
    pub fn with_recorded_values(mut self, recorded: bool) -> Self {
        self.recorded = recorded;
        self
    }
    /// Allows reverting Secrets (off by default).
    pub fn allow_secrets(mut self, allow: bool) -> Self {
        self.allow_secrets = allow;
        self
    }
    /// Turns self-heal on with a policy.
    pub fn with_heal(mut self, policy: HealPolicy) -> Self {
        self.heal = Some(policy);
        self
    }
    /// The address of the API or page, for the link back in pull requests (`{link}/drifts/{id}`).
    pub fn with_link(mut self, link: Option<String>) -> Self {
        self.link = link;
        self
    }

    /// Turns automatic pull requests on with a policy ([`AutoAcceptPolicy`]).
    pub fn with_auto_accept(mut self, policy: AutoAcceptPolicy) -> Self {
        self.auto_accept = Some(policy);
        self
    }

    /// The policy of automatic pull requests, when they are on.
    pub fn auto_accept(&self) -> Option<&AutoAcceptPolicy> {
        self.auto_accept.as_ref()
    }

    /// The self-heal policy, when on.
    pub fn heal(&self) -> Option<&HealPolicy> {
        self.heal.as_ref()
    }

    fn act(&self) -> Result<&Arc<dyn ActStore>, Fault> {
        self.scanner.store.act.as_ref().ok_or_else(|| {
            Fault::Failed(drift_core::Error::config(
                "remediation needs a store with an audit trail (sqlite or postgres)",
            ))
        })
    }

    async fn note(&self, action: AuditAction, actor: &str, drift_id: i64, status: &str, detail: serde_json::Value) {
        self.close(action, actor, drift_id, status, detail, None).await;
    }

    /// Writes the outcome of an action, closing its `attempted` entry when it wrote one. An
    /// attempt closed already (a later start took this process for gone, or its deadline
    /// passed) gets the outcome anyway, unlinked, with `late_for` naming the attempt.
    async fn close(
        &self,
        action: AuditAction,
        actor: &str,
        drift_id: i64,
        status: &str,
        detail: serde_json::Value,
        attempt: Option<i64>,
    ) {
        let Ok(act) = self.act() else { return };
        let mut entry = AuditNote {
            action,
            actor: actor.to_owned(),
            drift_id: Some(drift_id),
            status: status.to_owned(),
            detail,
            attempt,
        };
        let mut written = act.note(&entry, Utc::now()).await;
        if let (Err(e), Some(late)) = (&written, attempt)
            && e.kind() == drift_core::ErrorKind::Conflict
        {
            tracing::warn!(drift_id, attempt = late, "the attempt was closed before its outcome was written");
            entry.attempt = None;
            entry.detail["late_for"] = json!(late);
            written = act.note(&entry, Utc::now()).await;
        }
        if let Err(e) = written {
            tracing::error!(error = %e, drift_id, action = action.as_str(), "the audit entry of a remediation was not written");
        }
    }

    /// Runs an action of `actor` about `drift_ids` that may write: an `attempted` entry for
    /// each drift first (with this process and the deadline; when it cannot be written, the
    /// action is not run), then `work` until it finishes, its timeout passes (a failure) or
    /// running actions are told to stop ([`Remedies::drain`]). Dropping `work` stops the
    /// processes it runs. Returns how it ended and the attempt of each drift.
    async fn attempt<T>(
        &self,
        action: AuditAction,
        actor: &str,
        drift_ids: &[i64],
        detail: serde_json::Value,
        work: impl std::future::Future<Output = Outcome<T>>,
    ) -> (Ended<T>, std::collections::BTreeMap<i64, i64>) {
        let _running = Running::start(&self.running);
        let mut attempts = std::collections::BTreeMap::new();
        if *self.stop_now.borrow() {
            let e =
                drift_core::Error::new(drift_core::ErrorKind::Unavailable, "the process is stopping; nothing was done");
            return (Ended::Done(Err(Fault::Failed(e))), attempts);
        }
        let act = match self.act() {
            Ok(a) => a.clone(),
            Err(fault) => return (Ended::Done(Err(fault)), attempts),
        };
        let now = Utc::now();
        let deadline = crate::attempt::deadline_after(now, self.timeout);
        for id in drift_ids {
            let mut detail = detail.clone();
            detail["runner"] = json!(Runner::this());
            detail["deadline"] = json!(deadline.to_rfc3339());
            let entry = AuditNote {
                action,
                actor: actor.to_owned(),
                drift_id: Some(*id),
                status: ATTEMPTED.to_owned(),
                detail,
                attempt: None,
            };
            match act.note(&entry, now).await {
                Ok(attempt) => {
                    attempts.insert(*id, attempt);
                }
                Err(e) => {
                    let e = drift_core::Error::new(
                        e.kind(),
                        format!("the audit trail cannot be written, so nothing was done: {}", e.message()),
                    );
                    return (Ended::Done(Err(Fault::Failed(e))), attempts);
                }
            }
        }
        let mut stop = self.stop_now.subscribe();
        let timeout = self.timeout;
        let ended = tokio::select! {
            biased;
            done = tokio::time::timeout(timeout, work) => Ended::Done(done.unwrap_or_else(|_| {
                Err(Fault::Failed(drift_core::Error::new(
                    drift_core::ErrorKind::Unavailable,
                    format!(
                        "the action did not finish within {timeout:?} (remediation.timeout) and was given up; what it had done by then is unknown"
                    ),
                )))
            })),
            _ = stop.wait_for(|stop| *stop) => Ended::Interrupted(
                "the process was stopped (SIGTERM or SIGINT) and the action did not finish within the shutdown grace; it was stopped with its git processes, and what it had done by then is unknown".to_owned(),
            ),
        };
        (ended, attempts)
    }

    /// Waits up to `grace` for the running actions to finish; those still running then are
    /// stopped and recorded as `interrupted` (given up to 5 more seconds for that). What a
    /// service or `drift fix` does on SIGTERM.
    pub async fn drain(&self, grace: Duration) {
        let mut running = self.running.subscribe();
        if tokio::time::timeout(grace, running.wait_for(|n| *n == 0)).await.is_ok() {
            return;
        }
        tracing::warn!(
            ?grace,
            "actions still running after the shutdown grace are stopped and recorded as interrupted"
        );
        self.stop_now.send_replace(true);
        if tokio::time::timeout(Duration::from_secs(5), running.wait_for(|n| *n == 0)).await.is_err() {
            tracing::error!("an action did not record its interruption; the next start closes its attempt");
        }
    }

    /// Closes the attempts that will never have an outcome ([`crate::attempt`]): those of a
    /// process of this host that is gone, and those past their deadline, as `interrupted`,
    /// with the reason and what the person should look at. Returns how many it closed. Run at
    /// the start of `drift fix` and of the service, and by the service after each pass.
    pub async fn close_interrupted(&self, now: DateTime<Utc>) -> drift_core::Result<usize> {
        let Ok(act) = self.act() else { return Ok(0) };
        let mut closed = 0;
        for entry in act.unfinished(1000).await? {
            let Some(why) = crate::attempt::interrupted(&entry, now) else { continue };
            let mut detail = json!({"reason": why});
            for key in ["object", "path", "branch", "planned", "written"] {
                if let Some(v) = entry.detail.get(key) {
                    detail[key] = v.clone();
                }
            }
            detail["look"] = json!(match entry.action {
                AuditAction::Accept =>
                    "its outcome is unknown: the branch may have been pushed (and a pull request opened); look at the repository",
                _ =>
                    "its outcome is unknown: the write may have reached the cluster; the next scan shows the field's value",
            });
            let note = AuditNote {
                action: entry.action,
                actor: entry.actor.clone(),
                drift_id: entry.drift_id,
                status: "interrupted".to_owned(),
                detail,
                attempt: Some(entry.id),
            };
            match act.note(&note, now).await {
                Ok(_) => {
                    closed += 1;
                    tracing::warn!(attempt = entry.id, drift_id = ?entry.drift_id, action = entry.action.as_str(), reason = %why, "an interrupted action was closed");
                }
                // Another process closed it first, or its outcome landed meanwhile.
                Err(e) if e.kind() == drift_core::ErrorKind::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Ok(closed)
    }

    /// The desired object of a drift, read from its repository's source now and prepared the
    /// way a scan prepares it (namespaces).
    async fn desired_object(&self, d: &StoredDrift) -> Outcome<Resource> {
        let source = self.scanner.desired.iter().find(|s| s.name() == d.repository).ok_or_else(|| {
            Fault::refused(
                Refusal::NotConfigured,
                format!("no desired source of this detector is named {:?}", d.repository),
            )
        })?;
        let mut snapshot = source.fetch().await?;
        drift_core::scan::prepare(&mut snapshot, &self.scanner.settings.options("remedy"));
        let key = key_of(d);
        snapshot.resources.into_iter().find(|r| r.key == key).ok_or_else(|| {
            Fault::refused(Refusal::NotInGit, format!("{} is no longer in Git ({})", object_of(d), d.repository))
        })
    }

    /// The live object, read now.
    async fn live_object(&self, d: &StoredDrift, api_version: &str) -> Outcome<Resource> {
        let key = key_of(d);
        let live = match &self.writer {
            Some(w) => w.get(api_version, &key).await?,
            None => {
                let snapshot = self.scanner.live.fetch(&drift_core::Scope::default()).await?;
                snapshot.resources.into_iter().find(|r| r.key == key)
            }
        };
        live.ok_or_else(|| {
            Fault::refused(
                Refusal::MissingObject,
                format!("{} is missing from the cluster: that is a sync, not a patch", object_of(d)),
            )
        })
    }

    /// A drift of another cluster (a store shared by several detectors) is not this one's to act
    /// on: its object of the same name here is another object.
    fn check_cluster(&self, d: &StoredDrift) -> Result<(), Fault> {
        let own = self.scanner.live.cluster();
        if d.cluster != own {
            return Err(Fault::refused(
                Refusal::OtherCluster,
                format!("drift {} is of cluster {:?}; this detector writes to cluster {own:?}", d.id, d.cluster),
            ));
        }
        Ok(())
    }

    /// A waiver written in Git since the last scan (the desired object is read now).
    fn check_git_waiver(d: &StoredDrift, desired: &Resource, now: DateTime<Utc>) -> Result<(), Fault> {
        // An annotation that does not parse still says someone meant to waive: no revert.
        let waivers = drift_core::waiver::of(desired).map_err(|why| {
            Fault::refused(
                Refusal::Waived,
                format!(
                    "drift {} ({}): its waiver annotation in Git does not parse ({why}); it is not reverted",
                    d.id,
                    object_of(d)
                ),
            )
        })?;
        if let Some(w) = waivers.iter().find(|w| w.covers(&d.path) && w.expires_at > now) {
            return Err(Fault::refused(
                Refusal::Waived,
                format!(
                    "drift {} ({} {}) is under a waiver in Git by {} until {}; it is not reverted",
                    d.id,
                    object_of(d),
                    d.path,
                    w.owner,
                    w.expires_at.to_rfc3339()
                ),
            ));
        }
        Ok(())
    }

    /// The rules that refuse a revert before anything is read.
    fn check_revert(&self, d: &StoredDrift, now: DateTime<Utc>) -> Result<(), Fault> {
        let what = format!("drift {} ({} {})", d.id, object_of(d), d.path);
        self.check_cluster(d)?;
        if d.status == DriftStatus::Resolved {
            return Err(Fault::refused(Refusal::Resolved, format!("{what} is resolved already")));
        }
        if d.status == DriftStatus::Waived || d.waived_until.is_some_and(|u| u > now) {
            let until = d.waived_until.map(|u| format!(" until {}", u.to_rfc3339())).unwrap_or_default();
            return Err(Fault::refused(
                Refusal::Waived,
                format!("{what} is under a waiver{until}; it is not reverted"),
            ));
        }
        if d.drift_type == DriftType::MissingResource {
            return Err(Fault::refused(
                Refusal::MissingObject,
                format!("{what}: the object is missing from the cluster; that is a sync, not a patch"),
            ));
        }
        if d.drift_type == DriftType::UnmanagedResource {
            return Err(Fault::refused(
                Refusal::NotInGit,
                format!("{what}: Git does not declare the object; deleting it is left to a person"),
            ));
        }
        if is_secret(d) && !self.allow_secrets {
            return Err(Fault::refused(
                Refusal::Secret,
                format!("{what} is a Secret; Secrets are reverted only with remediation.allow_secrets"),
            ));
        }
        if d.classification == Classification::ControllerManaged {
            return Err(Fault::refused(
                Refusal::ControllerManaged,
                format!(
                    "{what}: a controller owns the field ({}); it would put its value back",
                    d.changed_by.as_deref().unwrap_or("unknown")
                ),
            ));
        }
        Ok(())
    }

    /// Reverts one drift: dry run first, then (unless `dry_run`) the real apply, both with field
    /// manager `drift-detector`; written to the audit trail with `actor`, refusals included.
    pub async fn revert(&self, id: i64, actor: &str, dry_run: bool) -> Outcome<RevertOutcome> {
        let d = self.scanner.store.read.get(id).await?;
        if dry_run {
            let result = self.revert_drift(&d, actor, true).await;
            let status = match &result {
                Ok(_) => "dry_run",
                Err(Fault::Refused(_)) => "refused",
                Err(Fault::Failed(_)) => "failed",
            };
            self.note(AuditAction::Revert, actor, id, status, revert_detail(&result)).await;
            return result;
        }
        let (ended, attempt) = self.attempt_revert(&d, actor).await;
        let result = match ended {
            // A retry (its first answer lost): the field holds Git's value, or the drift was
            // resolved as reverted since.
            Ended::Done(Err(Fault::Refused(r)))
                if r.refusal == Refusal::NoLongerDrifted
                    || (r.refusal == Refusal::Resolved && d.resolution == Some(drift_core::Resolution::Reverted)) =>
            {
                match self.done_before(&d, attempt).await {
                    Some(earlier) => {
                        let detail =
                            json!({"paths": earlier.paths, "object": earlier.object, "earlier": earlier.earlier});
                        self.close(AuditAction::Revert, actor, id, "already_reverted", detail, attempt).await;
                        return Ok(earlier);
                    }
                    None => Err(Fault::Refused(r)),
                }
            }
            Ended::Done(result) => result,
            Ended::Interrupted(why) => {
                self.close(AuditAction::Revert, actor, id, "interrupted", json!({"reason": why}), attempt).await;
                return Err(Fault::Failed(drift_core::Error::new(drift_core::ErrorKind::Unavailable, why)));
            }
        };
        let status = match &result {
            Ok(_) => "reverted",
            Err(Fault::Refused(_)) => "refused",
            Err(Fault::Failed(_)) => "failed",
        };
        self.close(AuditAction::Revert, actor, id, status, revert_detail(&result), attempt).await;
        result
    }

    /// A revert of `d` that writes, as an attempt ([`Remedies::attempt`]).
    async fn attempt_revert(&self, d: &StoredDrift, actor: &str) -> (Ended<RevertOutcome>, Option<i64>) {
        let mut detail = json!({"object": object_of(d), "path": d.path});
        if !is_secret(d) {
            detail["planned"] = d.cluster_value.clone().unwrap_or(serde_json::Value::Null);
            detail["written"] = d.git_value.clone().unwrap_or(serde_json::Value::Null);
        }
        let (ended, attempts) =
            self.attempt(AuditAction::Revert, actor, &[d.id], detail, self.revert_drift(d, actor, false)).await;
        (ended, attempts.get(&d.id).copied())
    }

    /// A retry of a revert that was done already: the drift's field agrees with Git now (or
    /// the drift was resolved as reverted), and an earlier revert of it since it was detected (other than `attempt`) was recorded as
    /// done, or its answer was lost (its attempt failed, was interrupted or is unfinished).
    /// The outcome of that revert, with `earlier` naming its audit entry; `None` when there
    /// was none (the revert is then refused as `no_longer_drifted`).
    async fn done_before(&self, d: &StoredDrift, attempt: Option<i64>) -> Option<RevertOutcome> {
        let act = self.act().ok()?;
        let filter = AuditFilter {
            action: Some(AuditAction::Revert),
            drift_id: Some(d.id),
            since: Some(d.detected_at),
            ..AuditFilter::default()
        };
        let page = act.audit(&filter, PageRequest { limit: 50, after: None }).await.ok()?;
        let earlier = page.items.into_iter().find(|e| {
            Some(e.id) != attempt
                && e.attempt.is_none_or(|a| Some(a) != attempt)
                && matches!(e.status.as_str(), "reverted" | "already_reverted" | "interrupted" | "failed" | ATTEMPTED)
        })?;
        let shown = |key: &str| (!is_secret(d)).then(|| earlier.detail.get(key).cloned()).flatten();
        Some(RevertOutcome {
            drift_id: d.id,
            status: RevertStatus::Reverted,
            object: object_of(d),
            paths: vec![d.path.clone()],
            plan: None,
            actor: earlier.actor.clone(),
            replaced: shown("replaced").or_else(|| shown("planned")),
            written: shown("written"),
            earlier: Some(earlier.id),
        })
    }

    /// The value a revert of `d` by `actor` is planned against: the value the newest dry run of
    /// the drift by the same actor showed, else the drift's cluster value as the store holds
    /// it. `None` for a dry run (it plans against what it reads) and for a Secret (its values
    /// are hashed under a key that may differ between processes; its write is still guarded
    /// by the object's resourceVersion).
    async fn planned_against(&self, d: &StoredDrift, actor: &str, dry_run: bool) -> Outcome<Option<Planned>> {
        if dry_run || is_secret(d) {
            return Ok(None);
        }
        if let Ok(act) = self.act() {
            let dry_runs = AuditFilter {
                action: Some(AuditAction::Revert),
                drift_id: Some(d.id),
                actor: Some(actor.to_owned()),
                status: Some("dry_run".to_owned()),
                ..AuditFilter::default()
            };
            let newest = act.audit(&dry_runs, PageRequest { limit: 1, after: None }).await?;
            if let Some(entry) = newest.items.first()
                && let Some(value) = entry.detail.get("replaced")
            {
                let value = (!value.is_null()).then(|| value.clone());
                return Ok(Some(Planned { value, basis: format!("the dry run of {}", entry.at.to_rfc3339()) }));
            }
        }
        Ok(Some(Planned { value: d.cluster_value.clone(), basis: "the drift's cluster value".to_owned() }))
    }

    /// Reverts one drift under a precondition: the drifted field must still hold the value the
    /// revert was planned against ([`Remedies::planned_against`]; for a dry run, the value read
    /// first), else `stale`. Each attempt reads the object now, plans against it and sends the
    /// dry run and the write with its `resourceVersion` (the writer's precondition); a conflict
    /// (anyone wrote the object in between) starts a new attempt, which refuses the revert as
    /// `stale` when the drifted field changed and plans again when only other fields did. After
    /// [`ATTEMPTS`] conflicts in a row it is refused as `concurrent_change`, naming what changed.
    async fn revert_drift(&self, d: &StoredDrift, actor: &str, dry_run: bool) -> Outcome<RevertOutcome> {
        self.check_revert(d, Utc::now())?;
        let writer = self.writer.as_ref().ok_or_else(|| {
            Fault::refused(
                Refusal::NotConfigured,
                "no cluster to write to: reverts need a cluster (live.kubeconfig or in-cluster)",
            )
        })?;
        let desired = self.desired_object(d).await?;
        Self::check_git_waiver(d, &desired, Utc::now())?;
        let mut planned = self.planned_against(d, actor, dry_run).await?;
        let secret = is_secret(d);
        let mut first_read: Option<Resource> = None;
        for _ in 0..ATTEMPTS {
            let live = self.live_object(d, &desired.api_version).await?;
            first_read.get_or_insert_with(|| live.clone());
            let engine = &self.scanner.engine;
            let fresh = engine.compare_paths(&desired, Some(&live));
            let Some((path, now)) = fresh.iter().find(|(_, f)| f.path == d.path) else {
                return Err(Fault::refused(
                    Refusal::NoLongerDrifted,
                    format!(
                        "{} {}: Git and the cluster agree now; the next scan resolves the drift",
                        object_of(d),
                        d.path
                    ),
                ));
            };
            if now.classification == Classification::ControllerManaged {
                return Err(Fault::refused(
                    Refusal::ControllerManaged,
                    format!(
                        "{} {}: a controller owns the field now; it would put its value back",
                        object_of(d),
                        d.path
                    ),
                ));
            }
            if !secret {
                match &planned {
                    Some(p) if p.value != now.cluster_value => return Err(stale(d, p, &now.cluster_value)),
                    Some(_) => {}
                    // A dry run plans against what it reads first; a later attempt holds to it.
                    None => {
                        planned = Some(Planned {
                            value: now.cluster_value.clone(),
                            basis: "the value read by this dry run".to_owned(),
                        })
                    }
                }
            }
            let plan = revert_plan(&desired, &live, std::slice::from_ref(path)).map_err(drift_core::Error::from)?;
            let preview = match writer.send(&plan, &live, true).await {
                Ok(p) => p,
                Err(e) if e.kind() == drift_core::ErrorKind::Conflict => {
                    tracing::info!(drift_id = d.id, error = %e, "the object changed during the revert; read again");
                    continue;
                }
                Err(e) => return Err(cluster_fault(d, e)),
            };
            // The server's answer must change the drifted field and nothing else: a map or list
            // that server-side apply replaces whole (a Service's selector, a custom resource's
            // list) would take other fields with it. The dry run ran on the object read (its
            // resourceVersion was the precondition), so what else it shows is the apply's doing.
            let allowed: Vec<String> = drift_core::remedy::pointer_in(&live.object, path).into_iter().collect();
            let outside = drift_core::remedy::changed_outside(&live.object, &preview.object, &allowed);
            if !outside.is_empty() || allowed.is_empty() {
                return Err(Fault::refused(
                    Refusal::DryRunMismatch,
                    format!(
                        "{} {}: the server's dry run would also change {} (server-side apply replaces it whole); nothing was changed — use the revert patch (drift drifts get {}) instead",
                        object_of(d),
                        d.path,
                        outside.join(", "),
                        d.id
                    ),
                ));
            }
            if let Some((_, left)) =
                engine.compare_paths(&desired, Some(&preview)).into_iter().find(|(_, f)| f.path == d.path)
            {
                let shown = if secret {
                    String::from("a value other than Git's")
                } else {
                    left.cluster_value.map(|v| v.to_string()).unwrap_or_else(|| "absent".to_owned())
                };
                return Err(Fault::refused(
                    Refusal::DryRunMismatch,
                    format!(
                        "{} {}: the server's dry run does not show Git's value (the field would be {shown}); nothing was changed",
                        object_of(d),
                        d.path
                    ),
                ));
            }
            if !dry_run {
                match writer.send(&plan, &live, false).await {
                    Ok(_) => {}
                    Err(e) if e.kind() == drift_core::ErrorKind::Conflict => {
                        tracing::info!(drift_id = d.id, error = %e, "the object changed during the revert; read again");
                        continue;
                    }
                    Err(e) => return Err(cluster_fault(d, e)),
                }
                tracing::info!(drift_id = d.id, object = %object_of(d), path = %d.path, actor, "reverted");
            }
            let shown = |v: &Option<serde_json::Value>| (!secret).then(|| v.clone().unwrap_or(serde_json::Value::Null));
            return Ok(RevertOutcome {
                drift_id: d.id,
                status: if dry_run { RevertStatus::DryRun } else { RevertStatus::Reverted },
                object: object_of(d),
                paths: plan.paths.clone(),
                plan: (!secret).then_some(plan),
                actor: actor.to_owned(),
                replaced: shown(&now.cluster_value),
                written: shown(&now.git_value),
                earlier: None,
            });
        }
        // Every attempt met a write in between: say what changed since the first read.
        let last = self.live_object(d, &desired.api_version).await?;
        let changed = match &first_read {
            Some(first) => drift_core::remedy::changed_outside(&first.object, &last.object, &[]),
            None => Vec::new(),
        };
        let shown = if secret { vec!["(a Secret: not shown)".to_owned()] } else { changed.clone() };
        Err(Fault::refused_with(
            Refusal::ConcurrentChange,
            format!(
                "{} {}: the object was written by someone else between each read and write ({ATTEMPTS} attempts); changed since the first read: {}; nothing was changed, try again when it settles",
                object_of(d),
                d.path,
                if shown.is_empty() { "metadata only".to_owned() } else { shown.join(", ") }
            ),
            json!({"changed": shown}),
        ))
    }

    /// The live drifts of the same object that were accepted before (an open proposal), so that
    /// a new request updates the proposal with all of them.
    async fn accepted_before(&self, d: &StoredDrift, act: &Arc<dyn ActStore>) -> drift_core::Result<Vec<StoredDrift>> {
        let mut out = Vec::new();
        for status in [DriftStatus::Open, DriftStatus::Waived] {
            let filter = DriftFilter {
                status: Some(status),
                namespace: Some(d.namespace.clone()),
                repository: Some(d.repository.clone()),
                cluster: Some(d.cluster.clone()),
                kind: Some(d.resource_kind.clone()),
                ..DriftFilter::default()
            };
            let mut after = None;
            loop {
                let page = self.scanner.store.read.list(&filter, PageRequest { limit: 1000, after }).await?;
                for other in page.items {
                    if other.id == d.id || other.resource_name != d.resource_name || other.api_group != d.api_group {
                        continue;
                    }
                    let asked = AuditFilter {
                        action: Some(AuditAction::Accept),
                        drift_id: Some(other.id),
                        ..AuditFilter::default()
                    };
                    let entries = act.audit(&asked, PageRequest { limit: 20, after: None }).await?;
                    if entries.items.iter().any(|e| e.status == "proposed" || e.status == "updated") {
                        out.push(other);
                    }
                }
                match page.next {
                    Some(n) => after = Some(n),
                    None => break,
                }
            }
        }
        Ok(out)
    }

    /// Proposes the cluster's values of drifts of one object as a change of Git (a pull request
    /// on GitHub, a pushed branch elsewhere); earlier accepted drifts of the object that are
    /// still live go in the same change. Written to the audit trail for each drift.
    pub async fn accept(&self, ids: &[i64], actor: &str) -> Outcome<AcceptOutcome> {
        if ids.is_empty() {
            return Err(Fault::Failed(drift_core::Error::invalid_input("no drift to accept")));
        }
        let first = self.scanner.store.read.get(ids[0]).await?;
        let detail = json!({"object": object_of(&first), "branch": branch_of(&first)});
        let (ended, attempts) =
            self.attempt(AuditAction::Accept, actor, ids, detail, self.accept_drifts(ids, actor)).await;
        let result = match ended {
            Ended::Done(result) => result,
            Ended::Interrupted(why) => {
                for id in ids {
                    let detail = json!({"reason": why, "branch": branch_of(&first)});
                    self.close(AuditAction::Accept, actor, *id, "interrupted", detail, attempts.get(id).copied()).await;
                }
                return Err(Fault::Failed(drift_core::Error::new(drift_core::ErrorKind::Unavailable, why)));
            }
        };
        let (status, detail) = match &result {
            Ok(o) => (
                if o.proposal.updated { "updated" } else { "proposed" },
                json!({"object": o.object, "url": o.proposal.url, "pull_request": o.proposal.pull_request,
                       "branch": o.proposal.branch, "placed": o.proposal.placed, "unplaced": o.proposal.unplaced}),
            ),
            Err(Fault::Refused(r)) => {
                let mut detail = json!({"refusal": r.refusal, "reason": r.message});
                if let (Some(serde_json::Value::Object(extra)), Some(out)) = (&r.detail, detail.as_object_mut()) {
                    out.extend(extra.clone());
                }
                ("refused", detail)
            }
            Err(Fault::Failed(e)) => ("failed", json!({"error": e.to_string()})),
        };
        let noted: Vec<i64> = match &result {
            Ok(o) => o.drift_ids.clone(),
            Err(_) => ids.to_vec(),
        };
        for id in noted {
            self.close(AuditAction::Accept, actor, id, status, detail.clone(), attempts.get(&id).copied()).await;
        }
        // A drift asked about that the change did not cover still closes its attempt.
        for (id, attempt) in &attempts {
            if result.as_ref().is_ok_and(|o| !o.drift_ids.contains(id)) {
                let detail =
                    json!({"reason": "the change did not cover this drift: Git and the cluster agree on it now"});
                self.close(AuditAction::Accept, actor, *id, "refused", detail, Some(*attempt)).await;
            }
        }
        result
    }

    async fn accept_drifts(&self, ids: &[i64], actor: &str) -> Outcome<AcceptOutcome> {
        let act = self.act()?.clone();
        let mut drifts = Vec::with_capacity(ids.len());
        for id in ids {
            drifts.push(self.scanner.store.read.get(*id).await?);
        }
        let d = drifts[0].clone();
        let same = |o: &StoredDrift| {
            (&o.cluster, &o.repository, &o.api_group, &o.resource_kind, &o.namespace, &o.resource_name)
                == (&d.cluster, &d.repository, &d.api_group, &d.resource_kind, &d.namespace, &d.resource_name)
        };
        if let Some(other) = drifts.iter().find(|o| !same(o)) {
            return Err(Fault::Failed(drift_core::Error::invalid_input(format!(
                "drifts {} and {} are about different objects; one change is about one object",
                d.id, other.id
            ))));
        }
        self.check_cluster(&d)?;
        for o in &drifts {
            let what = format!("drift {} ({} {})", o.id, object_of(o), o.path);
            if o.status == DriftStatus::Resolved {
                return Err(Fault::refused(Refusal::Resolved, format!("{what} is resolved already")));
            }
            if is_secret(o) {
                return Err(Fault::refused(
                    Refusal::Secret,
                    format!(
                        "{what} is a Secret: its value is never written to Git; change it where the Secret comes from"
                    ),
                ));
            }
            if o.drift_type == DriftType::UnmanagedResource {
                return Err(Fault::refused(
                    Refusal::NotInGit,
                    format!("{what}: Git does not declare the object; adding it to Git is left to a person"),
                ));
            }
            if o.drift_type == DriftType::MissingResource {
                return Err(Fault::refused(
                    Refusal::MissingObject,
                    format!(
                        "{what}: the object is missing from the cluster; accepting that means deleting it from Git, which is left to a person"
                    ),
                ));
            }
        }
        let proposer = self.proposers.iter().find(|p| p.repository() == d.repository).ok_or_else(|| {
            Fault::refused(
                Refusal::NotConfigured,
                format!(
                    "no pull requests are configured for repository {:?}: accepting needs its `repositories[].url` to be a git remote or `github:OWNER/REPO`, not a local folder",
                    d.repository
                ),
            )
        })?;
        for earlier in self.accepted_before(&d, &act).await? {
            if !drifts.iter().any(|o| o.id == earlier.id) {
                drifts.push(earlier);
            }
        }
        let desired = self.desired_object(&d).await?;
        let live = if self.recorded {
            recorded_live(&desired, &drifts)
        } else {
            self.live_object(&d, &desired.api_version).await?
        };
        let fresh = self.scanner.engine.compare_paths(&desired, Some(&live));
        let mut changes = Vec::new();
        let mut covered = Vec::new();
        for o in &drifts {
            if let Some((path, now)) = fresh.iter().find(|(_, f)| f.path == o.path) {
                // A drift asked about must still hold the value the person decided on (the
                // store's cluster value): a value someone wrote since is not proposed unseen.
                if !self.recorded && ids.contains(&o.id) && now.cluster_value != o.cluster_value {
                    return Err(accept_stale(o, &now.cluster_value));
                }
                changes.push(FieldChange { path: path.clone(), value: lookup(&live.object, path).cloned() });
                // The pull request's body shows the value proposed (an earlier accepted drift's
                // may have moved on since the last scan).
                covered.push(StoredDrift { cluster_value: now.cluster_value.clone(), ..o.clone() });
            }
        }
        let covered: Vec<&StoredDrift> = covered.iter().collect();
        if changes.is_empty() {
            return Err(Fault::refused(
                Refusal::NoLongerDrifted,
                format!("{}: Git and the cluster agree now; the next scan resolves the drifts", object_of(&d)),
            ));
        }
        let request = ChangeRequest {
            key: desired.key.clone(),
            api_version: desired.api_version.clone(),
            changes,
            branch: branch_of(&d),
            title: format!(
                "drift: accept the live {} into Git ({})",
                object_of(&d),
                covered.iter().map(|o| o.path.as_str()).collect::<Vec<_>>().join(", ")
            ),
            body: self.body(&d, &covered, actor),
        };
        let proposal = proposer.propose(&request).await.map_err(|e| proposer_fault(&d, e))?;
        if proposal.placed.is_empty() {
            return Err(Fault::refused(
                Refusal::Unplaceable,
                format!(
                    "{}: the change cannot be placed in the desired source; put it there by hand: {}",
                    object_of(&d),
                    proposal.unplaced.join("; ")
                ),
            ));
        }
        tracing::info!(object = %object_of(&d), url = ?proposal.url, updated = proposal.updated, actor, "change proposed");
        Ok(AcceptOutcome {
            drift_ids: covered.iter().map(|o| o.id).collect(),
            object: object_of(&d),
            proposal,
            actor: actor.to_owned(),
        })
    }

    /// The pull request's body: one row per drift, and where it comes from.
    fn body(&self, d: &StoredDrift, drifts: &[&StoredDrift], actor: &str) -> String {
        let value = |v: &Option<serde_json::Value>| match v {
            Some(v) => format!("`{}`", v.to_string().replace('`', "'")),
            None => "(absent)".to_owned(),
        };
        let mut body = format!(
            "The drift detector found that the cluster `{}` differs from Git for **{}**, and {} asked to accept the cluster's values into Git.\n\n\
             | field | Git value | cluster value | changed by | when | drift |\n|---|---|---|---|---|---|\n",
            d.cluster,
            object_of(d),
            actor
        );
        for o in drifts {
            let link = match &self.link {
                Some(base) => format!("[{}]({}/drifts/{})", o.id, base.trim_end_matches('/'), o.id),
                None => o.id.to_string(),
            };
            body.push_str(&format!(
                "| `{}` | {} | {} | {} | {} | {} |\n",
                o.path,
                value(&o.git_value),
                value(&o.cluster_value),
                o.changed_by.as_deref().unwrap_or("unknown"),
                o.changed_at.map(|t| t.to_rfc3339()).unwrap_or_else(|| "unknown".into()),
                link
            ));
        }
        if self.recorded {
            body.push_str(
                "\nThe cluster was not read for this change: the values are those the last scan recorded (`last seen` of each drift).\n",
            );
        }
        body.push_str("\nAfter this is merged, the next scan resolves these drifts as `accepted`.\n");
        body
    }

    /// One round of self-heal at `now`: the open drifts the policy covers, past the grace period
    /// (or rejected by a person), reverted up to the rate limit. Nothing without a policy.
    pub async fn heal_round(&self, now: DateTime<Utc>) -> drift_core::Result<HealRound> {
        let Some(policy) = &self.heal else { return Ok(HealRound::default()) };
        let act = match self.act() {
            Ok(a) => a.clone(),
            Err(Fault::Failed(e)) => return Err(e),
            Err(Fault::Refused(r)) => return Err(drift_core::Error::config(r.message)),
        };
        let grace = chrono::Duration::from_std(policy.grace).unwrap_or(chrono::Duration::minutes(10));
        let per = chrono::Duration::from_std(policy.per).unwrap_or(chrono::Duration::hours(1));
        let mut round = HealRound::default();
        let mut candidates = Vec::new();
        let mut after = None;
        loop {
            // Only this detector's cluster: another cluster's object of the same name is another
            // object.
            let filter = DriftFilter {
                status: Some(DriftStatus::Open),
                cluster: Some(self.scanner.live.cluster().to_owned()),
                ..DriftFilter::default()
            };
            let page = self.scanner.store.read.list(&filter, PageRequest { limit: 1000, after }).await?;
            for d in page.items {
                if !policy.covers(&d)
                    || d.drift_type == DriftType::MissingResource
                    || d.drift_type == DriftType::UnmanagedResource
                    || d.classification == Classification::ControllerManaged
                    || (is_secret(&d) && !self.allow_secrets)
                {
                    continue;
                }
                if !self.scanner.desired.iter().any(|s| s.name() == d.repository) {
                    continue;
                }
                let rejected = rejected(act.as_ref(), &d).await?;
                let due = rejected
                    || (policy.classifications.is_empty() || policy.classifications.contains(&d.classification))
                        && d.acknowledged_at.is_none()
                        && d.detected_at + grace <= now;
                if due {
                    candidates.push((d, rejected));
                }
            }
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        round.candidates = candidates.len();
        if candidates.is_empty() {
            return Ok(round);
        }
        // The rate limit counts the reverts (and would-be reverts) of the window in the audit
        // trail, whatever else (refusals, failures) was written there.
        let limit = policy.max as usize;
        let mut done = 0;
        for status in ["reverted", "would_revert"] {
            let recent = AuditFilter {
                action: Some(AuditAction::Revert),
                actor: Some(HEAL_ACTOR.to_owned()),
                status: Some(status.to_owned()),
                since: Some(now - per),
                ..AuditFilter::default()
            };
            let page = PageRequest { limit: limit.min(1000) as u32, after: None };
            done += act.audit(&recent, page).await?.items.len();
        }
        let mut budget = limit.saturating_sub(done);
        // Oldest first: the longest-standing drifts are healed first.
        candidates.sort_by_key(|(d, _)| d.detected_at);
        for (d, rejected) in candidates {
            // One attempt per drift and grace period (in dry-run mode, one entry per drift).
            let mine = AuditFilter {
                action: Some(AuditAction::Revert),
                actor: Some(HEAL_ACTOR.to_owned()),
                drift_id: Some(d.id),
                since: (!policy.dry_run).then_some(now - grace),
                ..AuditFilter::default()
            };
            if !act.audit(&mine, PageRequest { limit: 1, after: None }).await?.items.is_empty() {
                continue;
            }
            if budget == 0 {
                round.limited += 1;
                continue;
            }
            let (ended, attempt) = if policy.dry_run {
                (Ended::Done(self.revert_drift(&d, HEAL_ACTOR, true).await), None)
            } else {
                self.attempt_revert(&d, HEAL_ACTOR).await
            };
            let result = match ended {
                Ended::Done(result) => result,
                Ended::Interrupted(why) => {
                    round.failed += 1;
                    self.close(AuditAction::Revert, HEAL_ACTOR, d.id, "interrupted", json!({"reason": why}), attempt)
                        .await;
                    break;
                }
            };
            match result {
                Ok(o) => {
                    budget -= 1;
                    let status = if policy.dry_run { "would_revert" } else { "reverted" };
                    if policy.dry_run {
                        round.would_revert += 1;
                    } else {
                        round.reverted += 1;
                    }
                    let mut detail = revert_detail(&Ok(o));
                    detail["rejected"] = json!(rejected);
                    self.close(AuditAction::Revert, HEAL_ACTOR, d.id, status, detail, attempt).await;
                }
                Err(Fault::Refused(r)) => {
                    round.refused += 1;
                    let detail = revert_detail(&Err(Fault::Refused(r)));
                    self.close(AuditAction::Revert, HEAL_ACTOR, d.id, "refused", detail, attempt).await;
                }
                Err(Fault::Failed(e)) => {
                    round.failed += 1;
                    tracing::warn!(drift_id = d.id, error = %e, "self-heal could not revert a drift");
                    let detail = json!({"error": e.to_string()});
                    self.close(AuditAction::Revert, HEAL_ACTOR, d.id, "failed", detail, attempt).await;
                }
            }
        }
        Ok(round)
    }
}

/// `POST /drifts/{id}/revert` and `/accept` of the API.
#[cfg(feature = "api")]
#[async_trait::async_trait]
impl drift_api::Remediate for Remedies {
    async fn revert(&self, id: i64, actor: &str, dry_run: bool) -> Result<RevertOutcome, Fault> {
        Remedies::revert(self, id, actor, dry_run).await
    }
    async fn accept(&self, ids: &[i64], actor: &str) -> Result<AcceptOutcome, Fault> {
        Remedies::accept(self, ids, actor).await
    }
}

/// How many times a revert reads, plans and writes when the object keeps changing under it.
const ATTEMPTS: usize = 3;

/// The value a revert was planned against (`None`: the field absent) and where it comes from.
#[derive(Debug, Clone)]
struct Planned {
    value: Option<serde_json::Value>,
    basis: String,
}

/// The `stale` refusal: the drifted field no longer holds the planned-against value.
fn stale(d: &StoredDrift, planned: &Planned, found: &Option<serde_json::Value>) -> Fault {
    let text = |v: &Option<serde_json::Value>| v.as_ref().map(ToString::to_string).unwrap_or_else(|| "absent".into());
    Fault::refused_with(
        Refusal::Stale,
        format!(
            "{} {}: the revert was planned against {} ({}), but the cluster now holds {}: someone changed it since, and the newer value is left in place; to revert it anyway, run the dry run again (drift fix {} --revert --dry-run) and then the revert",
            object_of(d),
            d.path,
            text(&planned.value),
            planned.basis,
            text(found),
            d.id
        ),
        json!({"planned": planned.value, "found": found}),
    )
}

/// The `stale` refusal of an accept: the cluster's value changed since the drift was recorded.
fn accept_stale(d: &StoredDrift, found: &Option<serde_json::Value>) -> Fault {
    let text = |v: &Option<serde_json::Value>| v.as_ref().map(ToString::to_string).unwrap_or_else(|| "absent".into());
    Fault::refused_with(
        Refusal::Stale,
        format!(
            "{} {}: the drift records the cluster's value {}, but the cluster now holds {}: someone changed it since, and a value nobody saw is not proposed; the next scan records it, then accept again",
            object_of(d),
            d.path,
            text(&d.cluster_value),
            text(found),
        ),
        json!({"planned": d.cluster_value, "found": found}),
    )
}

/// The audit detail of a revert: the paths, the value replaced and the value written (never a
/// Secret's), or the refusal with what it is about, or the error.
fn revert_detail(result: &Outcome<RevertOutcome>) -> serde_json::Value {
    match result {
        Ok(o) => {
            let mut detail = json!({"paths": o.paths, "object": o.object});
            if let (Some(replaced), Some(written)) = (&o.replaced, &o.written) {
                detail["replaced"] = replaced.clone();
                detail["written"] = written.clone();
            }
            detail
        }
        Err(Fault::Refused(r)) => {
            let mut detail = json!({"refusal": r.refusal, "reason": r.message});
            if let (Some(serde_json::Value::Object(extra)), Some(out)) = (&r.detail, detail.as_object_mut()) {
                out.extend(extra.clone());
            }
            detail
        }
        Err(Fault::Failed(e)) => json!({"error": e.to_string()}),
    }
}

/// What a cluster's refusal of a revert means: the object is gone (a refusal the caller can act
/// on), else a failure of the cluster (the API answers 502, whatever the kind of the cluster's
/// error). A conflict (the object changed since it was read) never gets here: the revert reads
/// it again.
fn cluster_fault(d: &StoredDrift, e: drift_core::Error) -> Fault {
    match e.kind() {
        drift_core::ErrorKind::NotFound => Fault::refused(
            Refusal::MissingObject,
            format!("{} is missing from the cluster: that is a sync, not a patch ({})", object_of(d), e.message()),
        ),
        drift_core::ErrorKind::InvalidInput => {
            Fault::Failed(drift_core::Error::new(drift_core::ErrorKind::Unexpected, e.message()))
        }
        _ => Fault::Failed(e),
    }
}

/// What a proposer's error means: a change that cannot be placed (the editor refuses the file,
/// the render does not come out as the cluster has it, nothing to propose) is a refusal with
/// the reason; an object the source does not render is not in Git; the rest is a failure of the
/// git server or the repository.
fn proposer_fault(d: &StoredDrift, e: drift_core::Error) -> Fault {
    match e.kind() {
        drift_core::ErrorKind::Unsupported
        | drift_core::ErrorKind::Unexpected
        | drift_core::ErrorKind::InvalidInput => Fault::refused(
            Refusal::Unplaceable,
            format!("{}: the change cannot be placed in Git: {}", object_of(d), e.message()),
        ),
        drift_core::ErrorKind::NotFound => {
            Fault::refused(Refusal::NotInGit, format!("{}: {}", object_of(d), e.message()))
        }
        _ => Fault::Failed(e),
    }
}

/// The branch of the accepted changes of one object: the same for every request about it.
pub fn branch_of(d: &StoredDrift) -> String {
    let mut h = Sha256::new();
    for part in [&d.cluster, &d.repository, &d.api_group, &d.resource_kind, &d.namespace, &d.resource_name] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    let name: String = d
        .resource_name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c.to_ascii_lowercase() } else { '-' })
        .take(40)
        .collect();
    format!("drift/accept/{}-{name}-{}", d.resource_kind.to_ascii_lowercase(), &hex::encode(h.finalize())[..10])
}

/// The self-heal task: a round every `tick` until `stop` turns true.
pub async fn run_heal(remedies: Arc<Remedies>, tick: Duration, stop: watch::Receiver<bool>) {
    every(tick, stop, || async {
        match remedies.heal_round(Utc::now()).await {
            Ok(r) if r.reverted + r.would_revert + r.refused + r.failed > 0 => tracing::info!(
                candidates = r.candidates,
                reverted = r.reverted,
                would_revert = r.would_revert,
                refused = r.refused,
                failed = r.failed,
                limited = r.limited,
                "self-heal round"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "self-heal round failed; retried at the next tick"),
        }
    })
    .await;
}

/// Runs `round` every `tick` (the first at once) until `stop` turns true; a round in progress
/// finishes first.
async fn every<F, R>(tick: Duration, mut stop: watch::Receiver<bool>, mut round: F)
where
    F: FnMut() -> R,
    R: std::future::Future<Output = ()>,
{
    loop {
        if *stop.borrow() {
            return;
        }
        round().await;
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = stop.changed() => {}
        }
    }
}

/// Git's object with the cluster's values the store recorded for `drifts` put where their
/// paths are in it: what the cluster held at the last scan, as far as Git's object can show it.
/// A drift whose path Git's object does not have (a field only the cluster has) changes nothing.
fn recorded_live(desired: &Resource, drifts: &[StoredDrift]) -> Resource {
    let mut object = serde_json::Value::clone(&desired.object);
    for o in drifts {
        let Some(pointer) = pointer_of_display(&object, &o.path) else { continue };
        match &o.cluster_value {
            Some(v) => {
                if let Some(slot) = object.pointer_mut(&pointer) {
                    *slot = v.clone();
                }
            }
            None => {
                if let Some((parent, last)) = pointer.rsplit_once('/')
                    && let Some(serde_json::Value::Object(m)) = object.pointer_mut(parent)
                {
                    m.remove(&last.replace("~1", "/").replace("~0", "~"));
                }
            }
        }
    }
    Resource { object: Arc::new(object), ..desired.clone() }
}

/// The JSON pointer, in `object`, of a drift path as drifts show it (`data.mode`,
/// `spec.template.spec.containers[name=web].image`, `metadata.labels.app.kubernetes.io/name`):
/// field names are matched against the object's own keys (the longest first, since a key may
/// hold dots), keyed items by the values of their shown key fields, positional items by index.
/// `None` when the object has no such place.
fn pointer_of_display(object: &serde_json::Value, path: &str) -> Option<String> {
    fn escape(token: &str) -> String {
        token.replace('~', "~0").replace('/', "~1")
    }
    fn walk(v: &serde_json::Value, rest: &str) -> Option<String> {
        if rest.is_empty() {
            return Some(String::new());
        }
        match v {
            serde_json::Value::Object(m) => {
                let mut keys: Vec<&String> = m
                    .keys()
                    .filter(|k| {
                        rest.strip_prefix(k.as_str())
                            .is_some_and(|after| after.is_empty() || after.starts_with(['.', '[']))
                    })
                    .collect();
                keys.sort_by_key(|k| std::cmp::Reverse(k.len()));
                keys.into_iter().find_map(|k| {
                    let after = &rest[k.len()..];
                    let after = after.strip_prefix('.').unwrap_or(after);
                    walk(&m[k], after).map(|p| format!("/{}{p}", escape(k)))
                })
            }
            serde_json::Value::Array(items) => {
                let inner = rest.strip_prefix('[')?;
                let end = inner.find(']')?;
                let (selector, after) = (&inner[..end], &inner[end + 1..]);
                let after = after.strip_prefix('.').unwrap_or(after);
                let index = match selector.parse::<usize>() {
                    Ok(i) => i,
                    Err(_) => {
                        let pairs: Vec<(&str, &str)> =
                            selector.split(',').map(|kv| kv.split_once('=')).collect::<Option<_>>()?;
                        items.iter().position(|item| {
                            pairs.iter().all(|(k, want)| {
                                item.get(*k).and_then(drift_core::path::scalar_text).as_deref() == Some(*want)
                            })
                        })?
                    }
                };
                walk(items.get(index)?, after).map(|p| format!("/{index}{p}"))
            }
            _ => None,
        }
    }
    walk(object, path)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_drift_path_is_found_in_the_object_by_its_keys_items_and_dotted_names() {
        let object = json!({"metadata": {"labels": {"app.kubernetes.io/name": "web", "app": "x"}},
            "spec": {"replicas": 3, "template": {"spec": {"containers": [
                {"name": "side", "image": "a"}, {"name": "web", "image": "nginx:1", "ports": [{"containerPort": 80}]}]}}}});
        let at = |p: &str| pointer_of_display(&object, p);
        assert_eq!(at("spec.replicas").as_deref(), Some("/spec/replicas"));
        assert_eq!(
            at("metadata.labels.app.kubernetes.io/name").as_deref(),
            Some("/metadata/labels/app.kubernetes.io~1name")
        );
        assert_eq!(at("metadata.labels.app").as_deref(), Some("/metadata/labels/app"));
        assert_eq!(
            at("spec.template.spec.containers[name=web].image").as_deref(),
            Some("/spec/template/spec/containers/1/image")
        );
        assert_eq!(
            at("spec.template.spec.containers[name=web].ports[containerPort=80].containerPort").as_deref(),
            Some("/spec/template/spec/containers/1/ports/0/containerPort")
        );
        assert_eq!(
            at("spec.template.spec.containers[0].name").as_deref(),
            Some("/spec/template/spec/containers/0/name")
        );
        assert_eq!(at("spec.template.spec.containers[name=db].image"), None, "no such item");
        assert_eq!(at("spec.paused"), None, "a field only the cluster has");
    }

    #[test]
    fn the_recorded_values_go_where_their_paths_are_and_an_absent_value_removes_the_field() {
        let desired = Resource::from_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "shop"}, "data": {"mode": "fast", "size": "s"}}))
        .unwrap();
        let mut mode = drift("shop", "ConfigMap", DriftType::ConfigmapDrift, Severity::Medium);
        mode.path = "data.mode".into();
        mode.cluster_value = Some(json!("slow"));
        let mut size = mode.clone();
        size.path = "data.size".into();
        size.cluster_value = None;
        let mut extra = mode.clone();
        extra.path = "data.extra".into();
        extra.cluster_value = Some(json!("only in the cluster"));
        let live = recorded_live(&desired, &[mode, size, extra]);
        assert_eq!(
            *live.object,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "shop"}, "data": {"mode": "slow"}})
        );
        assert_eq!(live.key, desired.key);
    }

    fn drift(namespace: &str, kind: &str, t: DriftType, severity: Severity) -> StoredDrift {
        StoredDrift {
            id: 1,
            fingerprint: "f".into(),
            detected_at: Utc::now(),
            last_seen: Utc::now(),
            occurrences: 1,
            cluster: "prod".into(),
            repository: "shop".into(),
            api_group: "apps".into(),
            resource_kind: kind.into(),
            namespace: namespace.into(),
            resource_name: "web".into(),
            path: "spec.replicas".into(),
            drift_type: t,
            severity,
            git_value: None,
            cluster_value: None,
            status: DriftStatus::Open,
            resolved_at: None,
            resolution: None,
            changed_by: None,
            changed_at: None,
            changed_by_user: None,
            classification: Classification::ManualChange,
            decision_source: DecisionSource::Scanner,
            recommended_action: drift_core::RecommendedAction::CreatePr,
            waived_until: None,
            waived_by: None,
            acknowledged_at: None,
            revert: None,
        }
    }

    #[test]
    fn the_policy_filters_by_namespace_type_and_severity_and_empty_lists_allow_all() {
        let d = drift("shop", "Deployment", DriftType::ReplicasDrift, Severity::Low);
        assert!(HealPolicy::default().covers(&d));
        let only = |f: fn(&mut HealPolicy)| {
            let mut p = HealPolicy::default();
            f(&mut p);
            p.covers(&d)
        };
        assert!(only(|p| p.namespaces = vec!["shop".into()]));
        assert!(!only(|p| p.namespaces = vec!["billing".into()]));
        assert!(only(|p| p.drift_types = vec![DriftType::ReplicasDrift]));
        assert!(!only(|p| p.drift_types = vec![DriftType::ImageTagDrift]));
        assert!(!only(|p| p.severities = vec![Severity::High, Severity::Critical]));
        assert!(HealPolicy { max: 0, ..HealPolicy::default() }.validate().is_err());
    }

    #[test]
    fn a_waiver_annotation_that_does_not_parse_still_refuses_the_revert() {
        let d = drift("shop", "Deployment", DriftType::ReplicasDrift, Severity::Low);
        let desired = |annotation: &str| {
            Resource::from_object(serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "shop",
                             "annotations": {"drift-detector.io/waivers": annotation}}}))
            .unwrap()
        };
        let refused = Remedies::check_git_waiver(&d, &desired("- path: [unclosed"), Utc::now()).unwrap_err();
        assert!(
            matches!(&refused, Fault::Refused(r) if r.refusal == Refusal::Waived && r.message.contains("does not parse"))
        );
        let other = "- path: spec.template\n  owner: alice\n  reason: r\n  expires: 2099-12-31\n";
        assert!(Remedies::check_git_waiver(&d, &desired(other), Utc::now()).is_ok(), "another path's waiver");
    }

    #[test]
    fn a_stale_refusal_names_both_values_in_its_sentence_and_its_audit_detail() {
        let d = drift("shop", "Deployment", DriftType::ReplicasDrift, Severity::Low);
        let planned = Planned { value: Some(json!(5)), basis: "the drift's cluster value".into() };
        let refused = stale(&d, &planned, &None);
        let Fault::Refused(r) = &refused else { panic!("{refused:?}") };
        assert_eq!(r.refusal, Refusal::Stale);
        assert!(r.message.contains("planned against 5") && r.message.contains("now holds absent"), "{}", r.message);
        let detail = revert_detail(&Err(refused));
        assert_eq!(
            (&detail["refusal"], &detail["planned"], &detail["found"]),
            (&json!("stale"), &json!(5), &json!(null))
        );
        // A Secret's outcome has no values: its audit entry has none either.
        let outcome = RevertOutcome {
            drift_id: 1,
            status: RevertStatus::Reverted,
            object: "Secret shop/creds".into(),
            paths: vec!["data.password".into()],
            plan: None,
            actor: "carol".into(),
            replaced: None,
            written: None,
            earlier: None,
        };
        assert_eq!(revert_detail(&Ok(outcome)), json!({"paths": ["data.password"], "object": "Secret shop/creds"}));
    }

    #[test]
    fn one_branch_per_object_whatever_the_drift() {
        let a = drift("shop", "Deployment", DriftType::ReplicasDrift, Severity::Low);
        let mut b = a.clone();
        b.path = "spec.template.spec.containers[name=web].image".into();
        b.drift_type = DriftType::ImageTagDrift;
        assert_eq!(branch_of(&a), branch_of(&b));
        assert!(branch_of(&a).starts_with("drift/accept/deployment-web-"), "{}", branch_of(&a));
        let mut other = a.clone();
        other.namespace = "billing".into();
        assert_ne!(branch_of(&a), branch_of(&other));
        let mut odd = a.clone();
        odd.resource_name = "Web_1.x".into();
        assert!(branch_of(&odd).starts_with("drift/accept/deployment-web-1-x-"), "{}", branch_of(&odd));
    }
}
