//! Leader election on a `coordination.k8s.io/v1` Lease: [`KubeLease`], the
//! [`drift_model::lease::LeaseLock`] of the detector's replicas.
//!
//! One attempt reads the Lease, decides with [`drift_model::lease::decide`] (client-go's
//! rules: `holderIdentity`, `leaseDurationSeconds`, `acquireTime`, `renewTime`,
//! `leaseTransitions`), then creates it or replaces it carrying the `resourceVersion` it read:
//! when another candidate wrote in between, the API server answers 409 and this attempt does
//! not win. So two candidates never both lead the same term.
//!
//! The leader renews optimistically (client-go's fast path): it replaces the Lease it wrote last,
//! without reading it first, and reads only when that answers 409 (someone else wrote). A
//! standby watches the Lease (`metadata.name` field selector, from the version it read, so the
//! RBAC rule may name the Lease): each renewal is seen as it is written, so the claim's expiry
//! counts from the holder's last renewal, and a release or deletion wakes it at once.

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use drift_model::lease::{Attempt, LeaseLock, LeaseRecord, Step, Watched, decide};
use futures::StreamExt as _;
use futures::stream::BoxStream;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams, WatchEvent, WatchParams};

use crate::error::K8sError;

/// A candidate for the leadership kept in one Lease.
pub struct KubeLease {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
    duration: Duration,
    /// The record last read and when this candidate first saw it so (its expiry clock).
    observed: Mutex<Option<(LeaseRecord, DateTime<Utc>)>>,
    /// The Lease as this candidate last wrote it while leading: the next renewal replaces it
    /// without reading first.
    written: Mutex<Option<Lease>>,
    /// The newest `resourceVersion` read, written or watched: where a watch starts or resumes.
    version: Mutex<Option<String>>,
    /// The open watch of a standby (dropped when this candidate leads).
    watch: tokio::sync::Mutex<Option<BoxStream<'static, kube::Result<WatchEvent<Lease>>>>>,
}

/// How long one watch request lasts before the server ends it and it is resumed.
const WATCH_TIMEOUT_SECS: u32 = 290;

impl std::fmt::Debug for KubeLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeLease")
            .field("lease", &self.describe())
            .field("identity", &self.identity)
            .field("duration", &self.duration)
            .finish_non_exhaustive()
    }
}

impl KubeLease {
    /// The candidate `identity` for the Lease `namespace/name`, claiming `duration` each time it
    /// takes or renews it. No request is made yet.
    pub fn new(
        client: kube::Client,
        namespace: impl Into<String>,
        name: impl Into<String>,
        identity: impl Into<String>,
        duration: Duration,
    ) -> Self {
        let namespace = namespace.into();
        KubeLease {
            api: Api::namespaced(client, &namespace),
            namespace,
            name: name.into(),
            identity: identity.into(),
            duration,
            observed: Mutex::new(None),
            written: Mutex::new(None),
            version: Mutex::new(None),
            watch: tokio::sync::Mutex::new(None),
        }
    }

    fn remember_version(&self, lease: &Lease) {
        if let Some(v) = &lease.metadata.resource_version {
            *crate::lock(&self.version) = Some(v.clone());
        }
    }

    /// Opens a watch of this Lease from the newest version known (read first when none is).
    async fn open_watch(
        &self,
        clock: &(dyn Fn() -> DateTime<Utc> + Send + Sync),
    ) -> drift_model::Result<BoxStream<'static, kube::Result<WatchEvent<Lease>>>> {
        let known = crate::lock(&self.version).clone();
        let version = match known {
            Some(v) => v,
            None => {
                let current =
                    self.api.get_opt(&self.name).await.map_err(|e| K8sError::from_kube("get", self.what(), e))?;
                self.observe(current.as_ref().map(record_of).as_ref(), clock());
                match &current {
                    Some(l) => {
                        self.remember_version(l);
                        l.metadata.resource_version.clone().unwrap_or_default()
                    }
                    // No Lease yet: from now on ("0" would replay what exists, which is nothing).
                    None => "0".to_owned(),
                }
            }
        };
        let params = WatchParams::default().fields(&format!("metadata.name={}", self.name)).timeout(WATCH_TIMEOUT_SECS);
        let stream = self.api.watch(&params, &version).await.map_err(|e| {
            // The version may be the cause (410 Gone): the next watch starts from a fresh read.
            *crate::lock(&self.version) = None;
            drift_model::Error::from(K8sError::from_kube("watch", self.what(), e))
        })?;
        Ok(stream.boxed())
    }

    /// When this candidate first saw `record` as it is now (now, if it changed since the last
    /// read).
    fn observe(&self, record: Option<&LeaseRecord>, now: DateTime<Utc>) -> DateTime<Utc> {
        let mut observed = crate::lock(&self.observed);
        match (record, observed.as_ref()) {
            (Some(r), Some((seen, at))) if seen == r => *at,
            (Some(r), _) => {
                *observed = Some((r.clone(), now));
                now
            }
            (None, _) => {
                *observed = None;
                now
            }
        }
    }

    fn what(&self) -> String {
        format!("Lease {}/{}", self.namespace, self.name)
    }

    /// Writes `record`: creates the Lease when there was none, else replaces the one read,
    /// conditional on its `resourceVersion`.
    async fn write(&self, current: Option<Lease>, record: &LeaseRecord) -> drift_model::Result<Lease> {
        let what = self.what();
        let written = match current {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        namespace: Some(self.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec_of(record)),
                };
                self.api
                    .create(&PostParams::default(), &lease)
                    .await
                    .map_err(|e| K8sError::from_kube("create", what, e))
            }
            Some(mut lease) => {
                // The read resourceVersion stays in the metadata: the replace is a compare-and-swap.
                lease.spec = Some(spec_of(record));
                self.api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
                    .map_err(|e| K8sError::from_kube("update", what, e))
            }
        };
        match written {
            Ok(lease) => {
                self.remember_version(&lease);
                Ok(lease)
            }
            Err(e) if e.code() == Some(409) => Err(drift_model::Error::conflict(format!(
                "{}: another candidate wrote it first; this attempt does not lead",
                self.what()
            ))),
            Err(e) => Err(e.into()),
        }
    }
}

#[async_trait]
impl LeaseLock for KubeLease {
    fn identity(&self) -> &str {
        &self.identity
    }

    fn describe(&self) -> String {
        self.what()
    }

    async fn try_acquire_or_renew(&self, now: DateTime<Utc>) -> drift_model::Result<Attempt> {
        // A leader renews the Lease it wrote last without reading it: one request, not two.
        // A 409 means someone else wrote since; then read and decide as a candidate does.
        let written = crate::lock(&self.written).take();
        if let Some(own) = written {
            let record = record_of(&own);
            if let Step::Renew(renewed) = decide(&self.identity, Some(&record), now, now, self.duration) {
                match self.write(Some(own), &renewed).await {
                    Ok(lease) => {
                        *crate::lock(&self.written) = Some(lease);
                        self.observe(Some(&renewed), now);
                        return Ok(Attempt::Leading { acquired: false });
                    }
                    Err(e) if e.kind() == drift_model::ErrorKind::Conflict => {
                        tracing::debug!(lease = %self.what(), "the Lease changed since this leader wrote it; reading it");
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        let current = self.api.get_opt(&self.name).await.map_err(|e| K8sError::from_kube("get", self.what(), e))?;
        if let Some(l) = &current {
            self.remember_version(l);
        }
        let record = current.as_ref().map(record_of);
        let observed_at = self.observe(record.as_ref(), now);
        let (record, acquired) = match decide(&self.identity, record.as_ref(), observed_at, now, self.duration) {
            Step::Held { holder, expires } => return Ok(Attempt::Standby { holder, expires }),
            Step::Renew(r) => (r, false),
            Step::Acquire(r) => (r, true),
        };
        let lease = self.write(current, &record).await?;
        *crate::lock(&self.written) = Some(lease);
        self.observe(Some(&record), now);
        // A leader needs no watch: drop a standby's (it resumes from a fresh read if this
        // candidate stands by again). Busy only while `changed` runs, which a leader never calls.
        if let Ok(mut watch) = self.watch.try_lock() {
            *watch = None;
        }
        Ok(Attempt::Leading { acquired })
    }

    async fn release(&self, now: DateTime<Utc>) -> drift_model::Result<()> {
        crate::lock(&self.written).take();
        let Some(current) =
            self.api.get_opt(&self.name).await.map_err(|e| K8sError::from_kube("get", self.what(), e))?
        else {
            return Ok(());
        };
        let record = record_of(&current);
        if record.holder() != Some(self.identity.as_str()) {
            return Ok(());
        }
        let released = record.released(now);
        self.write(Some(current), &released).await?;
        self.observe(Some(&released), now);
        Ok(())
    }

    fn can_watch(&self) -> bool {
        true
    }

    async fn changed(&self, clock: &(dyn Fn() -> DateTime<Utc> + Send + Sync)) -> drift_model::Result<Watched> {
        // A leader's cached write is stale once it stands by.
        crate::lock(&self.written).take();
        // Held across the wait: a dropped call leaves the stream, and its unread events, here.
        let mut watch = self.watch.lock().await;
        let stream = match &mut *watch {
            Some(stream) => stream,
            None => watch.insert(self.open_watch(clock).await?),
        };
        loop {
            let event = stream.next().await;
            let lease = match event {
                Some(Ok(WatchEvent::Added(lease) | WatchEvent::Modified(lease))) => Some(lease),
                Some(Ok(WatchEvent::Deleted(lease))) => {
                    self.remember_version(&lease);
                    None
                }
                Some(Ok(WatchEvent::Bookmark(b))) => {
                    *crate::lock(&self.version) = Some(b.metadata.resource_version);
                    continue;
                }
                Some(Ok(WatchEvent::Error(status))) => {
                    // 410 Gone: the version is too old; the next watch starts from a fresh read.
                    tracing::debug!(lease = %self.what(), code = status.code, message = %status.message, "the watch on the Lease ended");
                    if status.code == 410 {
                        *crate::lock(&self.version) = None;
                    }
                    *watch = None;
                    return Ok(Watched::Ended);
                }
                Some(Err(e)) => {
                    *watch = None;
                    return Err(K8sError::from_kube("watch", self.what(), e).into());
                }
                None => {
                    *watch = None;
                    return Ok(Watched::Ended);
                }
            };
            let now = clock();
            let record = lease.as_ref().map(record_of);
            if let Some(l) = &lease {
                self.remember_version(l);
            }
            let observed_at = self.observe(record.as_ref(), now);
            return Ok(Watched::judge(&self.identity, record.as_ref(), observed_at, now));
        }
    }
}

/// The label of the membership Leases of replicas that share clusters; its value is the group
/// (the `leader_election.lease` name).
pub const MEMBERS_LABEL: &str = "drift-detector.io/members-of";

/// The replicas of a detector that share its clusters (sharding), each keeping a Lease of its own
/// (`GROUP-member-IDENTITY`, labelled [`MEMBERS_LABEL`]: `GROUP`) renewed at every
/// [`KubeMembers::heartbeat`]. A member is alive while its Lease changes: one whose Lease this
/// replica has not seen change for the lease duration (on this replica's own clock, as a
/// standby judges a leader: no clock of another machine is compared) is gone.
pub struct KubeMembers {
    api: Api<Lease>,
    namespace: String,
    group: String,
    name: String,
    identity: String,
    duration: Duration,
    /// Each member Lease's last `resourceVersion` seen, and when it was first seen so.
    seen: Mutex<std::collections::BTreeMap<String, (String, std::time::Instant)>>,
}

impl std::fmt::Debug for KubeMembers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeMembers")
            .field("lease", &format!("Lease {}/{}", self.namespace, self.name))
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

/// A Lease name for `identity` in `group`: lower-case, characters a name may not hold as `-`,
/// at most 253 characters.
fn member_name(group: &str, identity: &str) -> String {
    let clean: String = identity
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '-' })
        .collect();
    let mut name = format!("{group}-member-{}", clean.trim_matches(|c: char| c == '-' || c == '.'));
    name.truncate(253);
    name.trim_end_matches(['-', '.']).to_owned()
}

impl KubeMembers {
    /// This replica (`identity`) among the members of `group`, its Lease in `namespace`, alive
    /// for `duration` after each heartbeat. No request is made yet.
    pub fn new(
        client: kube::Client,
        namespace: impl Into<String>,
        group: impl Into<String>,
        identity: impl Into<String>,
        duration: Duration,
    ) -> Self {
        let namespace = namespace.into();
        let group = group.into();
        let identity = identity.into();
        KubeMembers {
            api: Api::namespaced(client, &namespace),
            name: member_name(&group, &identity),
            namespace,
            group,
            identity,
            duration,
            seen: Mutex::new(std::collections::BTreeMap::new()),
        }
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Renews this replica's membership Lease at `now` (creating it the first time), then lists
    /// the group's Leases: the identities of the members alive, this one included, sorted.
    pub async fn heartbeat(&self, now: DateTime<Utc>) -> drift_model::Result<Vec<String>> {
        let what = format!("Lease {}/{}", self.namespace, self.name);
        let record = LeaseRecord {
            holder: Some(self.identity.clone()),
            lease_duration: self.duration,
            acquire_time: None,
            renew_time: Some(now),
            transitions: 0,
        };
        let current = self.api.get_opt(&self.name).await.map_err(|e| K8sError::from_kube("get", what.clone(), e))?;
        let written = match current {
            Some(mut lease) => {
                lease.spec = Some(spec_of(&record));
                self.api.replace(&self.name, &PostParams::default(), &lease).await
            }
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        namespace: Some(self.namespace.clone()),
                        labels: Some([(MEMBERS_LABEL.to_owned(), self.group.clone())].into()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec_of(&record)),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
        };
        written.map_err(|e| K8sError::from_kube("update", what, e))?;
        let listed = self
            .api
            .list(&kube::api::ListParams::default().labels(&format!("{MEMBERS_LABEL}={}", self.group)))
            .await
            .map_err(|e| K8sError::from_kube("list", format!("Leases of {} in {}", self.group, self.namespace), e))?;
        let at = std::time::Instant::now();
        let mut seen = crate::lock(&self.seen);
        let mut alive = vec![self.identity.clone()];
        let mut names = std::collections::BTreeSet::new();
        for lease in listed.items {
            let Some(name) = lease.metadata.name.clone() else { continue };
            names.insert(name.clone());
            let version = lease.metadata.resource_version.clone().unwrap_or_default();
            let record = record_of(&lease);
            let first_seen = match seen.get(&name) {
                Some((v, t)) if *v == version => *t,
                _ => {
                    seen.insert(name.clone(), (version, at));
                    at
                }
            };
            // A member that left released its Lease (no holder); one that died stops changing it.
            let Some(holder) = record.holder().map(str::to_owned) else { continue };
            let lasts = record.lease_duration.max(Duration::from_secs(1));
            if holder != self.identity && at.duration_since(first_seen) < lasts {
                alive.push(holder);
            }
        }
        seen.retain(|n, _| names.contains(n));
        alive.sort();
        alive.dedup();
        Ok(alive)
    }

    /// Leaves the group: the membership Lease is released (no holder), so the others count this
    /// replica out at their next heartbeat.
    pub async fn leave(&self, now: DateTime<Utc>) -> drift_model::Result<()> {
        let what = format!("Lease {}/{}", self.namespace, self.name);
        let Some(mut lease) =
            self.api.get_opt(&self.name).await.map_err(|e| K8sError::from_kube("get", what.clone(), e))?
        else {
            return Ok(());
        };
        let record = record_of(&lease).released(now);
        lease.spec = Some(spec_of(&record));
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map_err(|e| K8sError::from_kube("update", what, e))?;
        Ok(())
    }
}

fn to_chrono(t: &MicroTime) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.0.as_second(), u32::try_from(t.0.subsec_nanosecond()).unwrap_or(0))
}

fn to_micro(t: DateTime<Utc>) -> Option<MicroTime> {
    let nanos = i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0);
    k8s_openapi::jiff::Timestamp::new(t.timestamp(), nanos).ok().map(MicroTime)
}

/// The record a Lease holds (a Lease without a spec is free).
fn record_of(lease: &Lease) -> LeaseRecord {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseRecord {
        holder: spec.holder_identity,
        lease_duration: Duration::from_secs(spec.lease_duration_seconds.map_or(0, |s| u64::try_from(s).unwrap_or(0))),
        acquire_time: spec.acquire_time.as_ref().and_then(to_chrono),
        renew_time: spec.renew_time.as_ref().and_then(to_chrono),
        transitions: spec.lease_transitions.unwrap_or(0),
    }
}

fn spec_of(record: &LeaseRecord) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(record.holder.clone().unwrap_or_default()),
        lease_duration_seconds: Some(i32::try_from(record.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)),
        acquire_time: record.acquire_time.and_then(to_micro),
        renew_time: record.renew_time.and_then(to_micro),
        lease_transitions: Some(record.transitions),
        ..LeaseSpec::default()
    }
}
