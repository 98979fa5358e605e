//! Watch events taken together: the pure state machine between the watch stream and the
//! re-comparisons.
//!
//! Events that arrive while the previous batch is being handled pile up; the watch loop takes
//! what has arrived (up to a bound) and folds it here. Each object Git holds is re-compared once
//! per batch, with its newest state, in the order its first event arrived; the watch lag of an
//! object runs from that first event. Events about objects Git does not hold are dropped; sync
//! changes and stream errors are kept as [`Note`]s for the loop to log and count.

use std::collections::HashMap;
use std::time::Instant;

use drift_core::source::LiveEvent;
use drift_core::{CoverageStatus, GroupKind, Resource, ResourceKey};

/// One object to re-compare.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// The object.
    pub key: ResourceKey,
    /// Its newest live state; `None` when the newest event deleted it.
    pub live: Option<Resource>,
    /// When the first event of the object in this batch arrived.
    pub since: Instant,
    /// When the event of its newest state arrived.
    pub received: Instant,
}

/// What the loop should log or count besides the re-comparisons.
#[derive(Debug)]
pub enum Note {
    /// A (kind, namespace) lost sync: nothing there is resolved until it is in sync again.
    Desynced {
        /// The kind.
        kind: GroupKind,
        /// The namespace.
        namespace: Option<String>,
        /// Why.
        status: CoverageStatus,
    },
    /// A (kind, namespace) is in sync again.
    Synced {
        /// The kind.
        kind: GroupKind,
        /// The namespace.
        namespace: Option<String>,
    },
    /// The stream reported an error.
    Error(drift_core::Error),
}

/// Events folded so far.
#[derive(Debug, Default)]
pub struct Batch {
    pending: Vec<Pending>,
    slot: HashMap<ResourceKey, usize>,
    notes: Vec<Note>,
    events: usize,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds one event that arrived at `received`. `held` says whether Git holds an object
    /// (events about other objects are dropped).
    pub fn push(
        &mut self,
        received: Instant,
        event: drift_core::Result<LiveEvent>,
        held: impl Fn(&ResourceKey) -> bool,
    ) {
        self.events += 1;
        let (key, live) = match event {
            Ok(LiveEvent::Applied(r)) => (r.key.clone(), Some(r)),
            Ok(LiveEvent::Deleted(key)) => (key, None),
            Ok(LiveEvent::Desynced { kind, namespace, status }) => {
                self.notes.push(Note::Desynced { kind, namespace, status });
                return;
            }
            Ok(LiveEvent::Synced { kind, namespace }) => {
                self.notes.push(Note::Synced { kind, namespace });
                return;
            }
            Err(e) => {
                self.notes.push(Note::Error(e));
                return;
            }
        };
        if !held(&key) {
            return;
        }
        match self.slot.get(&key) {
            // The newest state wins; the lag still counts from the first event of the object.
            Some(&i) => {
                self.pending[i].live = live;
                self.pending[i].received = received;
            }
            None => {
                self.slot.insert(key.clone(), self.pending.len());
                self.pending.push(Pending { key, live, since: received, received });
            }
        }
    }

    /// Events folded so far (all of them, dropped ones included).
    pub fn events(&self) -> usize {
        self.events
    }

    /// Whether no event was folded.
    pub fn is_empty(&self) -> bool {
        self.events == 0
    }

    /// The objects to re-compare, in the order of their first event, and the notes.
    pub fn finish(self) -> (Vec<Pending>, Vec<Note>) {
        (self.pending, self.notes)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn cm(name: &str, value: &str) -> Resource {
        Resource::from_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "shop"}, "data": {"k": value}}))
        .unwrap()
    }

    fn all(_: &ResourceKey) -> bool {
        true
    }

    #[test]
    fn the_newest_state_of_each_object_wins_and_the_lag_runs_from_its_first_event() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut b = Batch::new();
        b.push(at(0), Ok(LiveEvent::Applied(cm("a", "1"))), all);
        b.push(at(1), Ok(LiveEvent::Applied(cm("b", "1"))), all);
        b.push(at(2), Ok(LiveEvent::Applied(cm("a", "2"))), all);
        b.push(at(3), Ok(LiveEvent::Deleted(cm("b", "1").key)), all);
        assert_eq!(b.events(), 4);
        let (pending, notes) = b.finish();
        assert!(notes.is_empty());
        assert_eq!(pending.len(), 2, "one re-comparison per object");
        assert_eq!(pending[0].key.name, "a", "objects keep the order of their first event");
        assert_eq!(pending[0].live, Some(cm("a", "2")), "the newest state of a");
        assert_eq!(pending[0].since, at(0), "the lag of a runs from its first event");
        assert_eq!(pending[0].received, at(2), "its newest state arrived last");
        assert_eq!(pending[1].key.name, "b");
        assert_eq!(pending[1].live, None, "b was deleted last");
        assert_eq!(pending[1].since, at(1));
    }

    #[test]
    fn a_delete_then_a_create_leaves_the_created_object() {
        let t = Instant::now();
        let mut b = Batch::new();
        b.push(t, Ok(LiveEvent::Deleted(cm("a", "1").key)), all);
        b.push(t, Ok(LiveEvent::Applied(cm("a", "3"))), all);
        let (pending, _) = b.finish();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].live, Some(cm("a", "3")));
    }

    #[test]
    fn objects_git_does_not_hold_are_dropped_and_sync_changes_are_notes() {
        let t = Instant::now();
        let mut b = Batch::new();
        let only_a = |k: &ResourceKey| k.name == "a";
        b.push(t, Ok(LiveEvent::Applied(cm("stray", "1"))), only_a);
        let kind = GroupKind::new("", "ConfigMap");
        let status = CoverageStatus::Failed { message: "410".into() };
        b.push(t, Ok(LiveEvent::Desynced { kind: kind.clone(), namespace: Some("shop".into()), status }), only_a);
        b.push(t, Ok(LiveEvent::Synced { kind, namespace: Some("shop".into()) }), only_a);
        b.push(t, Err(drift_core::Error::unavailable("stream broke")), only_a);
        b.push(t, Ok(LiveEvent::Applied(cm("a", "1"))), only_a);
        assert_eq!(b.events(), 5, "every event is counted, dropped ones too");
        let (pending, notes) = b.finish();
        assert_eq!(pending.iter().map(|p| p.key.name.as_str()).collect::<Vec<_>>(), ["a"]);
        assert!(matches!(notes[0], Note::Desynced { .. }));
        assert!(matches!(notes[1], Note::Synced { .. }));
        assert!(matches!(&notes[2], Note::Error(e) if e.kind() == drift_core::ErrorKind::Unavailable));
        assert_eq!(notes.len(), 3);
    }

    #[test]
    fn an_empty_batch_has_nothing_to_do() {
        let b = Batch::new();
        assert!(b.is_empty());
        let (pending, notes) = b.finish();
        assert!(pending.is_empty() && notes.is_empty());
    }
}
