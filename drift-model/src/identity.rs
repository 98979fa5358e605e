//! The person behind a change: who sent the write that a drift's field manager names, read
//! from the Kubernetes audit log (`drift_runtime::identity` joins the two).
//!
//! A field manager says which client wrote a field (`kubectl-edit`), not who ran it. The audit
//! log of the API server says who sent each request: user, groups, source address and user
//! agent. A [`ChangeIdentity`] is that request's identity, stored with the drift, for the change
//! the drift's `changed_at` names: when the field changes again, the stored identity no longer
//! applies ([`ChangeIdentity::applies_to`]) until the newer change is joined.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::Result;

/// Who sent the write behind a drift, from one audit event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeIdentity {
    /// The authenticated user name (`alice`, `system:serviceaccount:ci:deployer`).
    pub username: String,
    /// The user's groups.
    #[serde(default)]
    pub groups: Vec<String>,
    /// The request's source addresses (the client first, then proxies), as the API server saw them.
    #[serde(default)]
    pub source_ips: Vec<String>,
    /// The client's User-Agent (as sent by the client: not proof of anything).
    #[serde(default)]
    pub user_agent: Option<String>,
    /// The Kubernetes verb of the request (`update`, `patch`).
    pub verb: String,
    /// The audit event's `auditID`.
    pub audit_id: String,
    /// When the API server received the request.
    pub request_time: DateTime<Utc>,
    /// The drift's `changed_at` this identity was joined for.
    pub changed_at: DateTime<Utc>,
}

impl ChangeIdentity {
    /// Whether it is the identity of the change a drift with this `changed_at` shows: a newer
    /// change of the field makes it stale.
    pub fn applies_to(&self, changed_at: Option<DateTime<Utc>>) -> bool {
        changed_at == Some(self.changed_at)
    }

    /// One line: `alice (dev, system:authenticated) from 10.0.0.7 with kubectl/v1.32.0`.
    pub fn describe(&self) -> String {
        let mut s = self.username.clone();
        if !self.groups.is_empty() {
            s.push_str(&format!(" ({})", self.groups.join(", ")));
        }
        if !self.source_ips.is_empty() {
            s.push_str(&format!(" from {}", self.source_ips.join(", ")));
        }
        if let Some(ua) = &self.user_agent {
            s.push_str(&format!(" with {ua}"));
        }
        s
    }
}

/// Where the identities of changes are kept: a store that can be read back.
#[async_trait]
pub trait ChangeIdentities: Send + Sync + std::fmt::Debug {
    /// Records `identity` as the person behind drift `drift_id`'s change. Returns false when no
    /// such drift exists. Writing the same identity again changes nothing.
    async fn identify(&self, drift_id: i64, identity: &ChangeIdentity) -> Result<bool>;
}

/// Where audit events go when they arrive other than from a file: the audit webhook endpoint
/// of the API hands each `EventList`'s items here (`drift_runtime::identity::Identifier`).
pub trait AuditIntake: Send + Sync + std::fmt::Debug {
    /// Takes the items of an `audit.k8s.io/v1` `EventList`; returns how many were audit events
    /// of writes it keeps for the join. An item that is not an audit event is an invalid-input
    /// error naming its index, and nothing of the list is kept.
    fn receive(&self, items: &[serde_json::Value]) -> Result<usize>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_applies_only_to_the_change_it_was_joined_for() {
        let t = DateTime::parse_from_rfc3339("2026-12-06T10:00:00Z").unwrap().with_timezone(&Utc);
        let id = ChangeIdentity {
            username: "alice".into(),
            groups: vec!["dev".into()],
            source_ips: vec!["10.0.0.7".into()],
            user_agent: Some("kubectl/v1.32.0".into()),
            verb: "patch".into(),
            audit_id: "a".into(),
            request_time: t,
            changed_at: t,
        };
        assert!(id.applies_to(Some(t)));
        assert!(!id.applies_to(Some(t + chrono::Duration::seconds(1))));
        assert!(!id.applies_to(None));
        assert_eq!(id.describe(), "alice (dev) from 10.0.0.7 with kubectl/v1.32.0");
    }
}
