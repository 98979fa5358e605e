//! Leader election on a `coordination.k8s.io/v1` Lease: [`KubeLease`], the
//! [`drift_model::lease::LeaseLock`] of the detector's replicas.
//!
//! One attempt reads the Lease, decides with [`drift_model::lease::decide`] (client-go's
//! rules: `holderIdentity`, `leaseDurationSeconds`, `acquireTime`, `renewTime`,
//! `leaseTransitions`), then creates it or replaces it carrying the `resourceVersion` it read:
//! when another candidate wrote in between, the API server answers 409 and this attempt does
//! not win. So two candidates never both lead the same term.

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use drift_model::lease::{Attempt, LeaseLock, LeaseRecord, Step, decide};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};

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
}

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
        }
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
    async fn write(&self, current: Option<Lease>, record: &LeaseRecord) -> drift_model::Result<()> {
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
            Ok(_) => Ok(()),
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
        let current = self.api.get_opt(&self.name).await.map_err(|e| K8sError::from_kube("get", self.what(), e))?;
        let record = current.as_ref().map(record_of);
        let observed_at = self.observe(record.as_ref(), now);
        let (record, acquired) = match decide(&self.identity, record.as_ref(), observed_at, now, self.duration) {
            Step::Held { holder, .. } => return Ok(Attempt::Standby { holder }),
            Step::Renew(r) => (r, false),
            Step::Acquire(r) => (r, true),
        };
        self.write(current, &record).await?;
        self.observe(Some(&record), now);
        Ok(Attempt::Leading { acquired })
    }

    async fn release(&self, now: DateTime<Utc>) -> drift_model::Result<()> {
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
