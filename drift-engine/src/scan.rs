//! One scan pass as a library function: desired, then the scope it implies, then live, then
//! compare, then report. It awaits the traits and spawns nothing.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Utc};

use drift_model::compare::Comparator;
use drift_model::desired::DesiredObject;
use drift_model::drift::Drift;
use drift_model::report::{ScanOutcome, ScanReport, Summary};
use drift_model::source::{DesiredSource, LiveSource};
use drift_model::tree::{JsonView, ObjectTree};
use drift_model::{
    Coverage, DesiredSnapshot, GroupKind, LiveSnapshot, Resource, ResourceKey, Scope, SourceWarning, is_cluster_scoped,
};

/// Options of one scan pass.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// Unique id of the scan (a UUID in the binary).
    pub scan_id: String,
    /// Namespace given to namespaced desired objects that name none (`default`).
    pub default_namespace: String,
    /// Custom kinds known to be cluster-scoped (besides the built-in table).
    pub cluster_scoped: Vec<GroupKind>,
    /// Clock, replaceable in tests.
    pub clock: fn() -> DateTime<Utc>,
    /// Counts the objects compared, for a front end that shows progress.
    pub progress: drift_model::progress::Progress,
    /// Report the live objects of the scope's kinds and namespaces that no desired object
    /// declares, as `unmanaged_resource` ([`crate::orphans`]). The live state is then read
    /// whole for those pairs, not only the objects Git names.
    pub orphans: bool,
    /// With orphans and several desired sources: the keys the other sources declare (sorted),
    /// so that an object one repository declares is not unmanaged for another.
    pub declared_elsewhere: std::sync::Arc<[ResourceKey]>,
    /// With orphans and several desired sources: another source could not be read whole, so
    /// what it declares is unknown. No object is then judged unmanaged, and no object Git does
    /// not hold is resolved (the report's `desired_complete` is false).
    pub elsewhere_unknown: bool,
    /// Check policies ([`crate::policy`]): the desired objects and their live counterparts, on
    /// the sides the policy names; `None` checks nothing.
    pub policy: Option<std::sync::Arc<crate::policy::Policy>>,
    /// The public keys (age recipients) of the identities given to open SOPS-encrypted files
    /// ([`drift_model::sops`]), `None` when no key is given: the note of an object left encrypted says
    /// which of the two it was.
    pub sops_recipients: Option<std::sync::Arc<[String]>>,
    /// Record the `resourceVersion` of the live object each desired object was compared with
    /// ([`ScanReport::live_versions`], which a watch reads to tell an event older than the
    /// report); `true` by default. A report printed once and dropped (`drift diff`) does without:
    /// noting them copies every compared key.
    pub live_versions: bool,
}

impl ScanOptions {
    /// Options with a scan id and the defaults.
    pub fn new(scan_id: impl Into<String>) -> Self {
        ScanOptions {
            scan_id: scan_id.into(),
            default_namespace: "default".to_owned(),
            cluster_scoped: Vec::new(),
            clock: Utc::now,
            progress: drift_model::progress::Progress::default(),
            orphans: false,
            declared_elsewhere: std::sync::Arc::from([]),
            elsewhere_unknown: false,
            policy: None,
            sops_recipients: None,
            live_versions: true,
        }
    }
}

/// Runs one scan pass and returns its report. Failure is data: when the desired or the live
/// state cannot be read, the report says `Failed` with the error as a warning and lists no drift,
/// so that a sink resolves nothing.
pub async fn run_scan(
    desired: &dyn DesiredSource,
    live: &dyn LiveSource,
    comparator: &dyn Comparator,
    options: &ScanOptions,
) -> ScanReport {
    let cluster = live.cluster().to_owned();
    let mut report = empty_report(desired.name(), &cluster, options);

    let mut snapshot = match desired.fetch().await {
        Ok(s) => s,
        Err(e) => {
            report.warnings.push(SourceWarning::error(e.kind(), format!("desired state: {e}")));
            return finish(report, 0, options);
        }
    };
    let mut options = options.clone();
    discover_cluster_scoped(live, &snapshot, &mut options).await;
    let options = &options;
    prepare_desired(&mut snapshot, &mut report, options);
    let mut scope = snapshot.scope();
    if options.orphans {
        scope.only = None;
    }
    // Orphans need every live object of the scope at once, and so do policies of the live side
    // and a comparator whose objects may all depend on one another; otherwise each live object
    // is compared as soon as it is read and let go, so that a pass holds the drifts, not the
    // live state.
    let live_policy = options.policy.as_ref().is_some_and(|p| p.checks(crate::policy::Side::Live));
    let related = if options.orphans || live_policy { None } else { comparator.relations(&snapshot.resources) };
    let read = match related {
        None => live.fetch(&scope).await.map(Live::Whole),
        Some(related) => {
            fetch_compared(live, &scope, &snapshot.resources, comparator, related).await.map(Live::Compared)
        }
    };
    let live_state = match read {
        Ok(s) => s,
        Err(e) => {
            report.warnings.push(SourceWarning::error(e.kind(), format!("live state of {cluster}: {e}")));
            return finish(report, 0, options);
        }
    };
    compare_into(report, snapshot, live_state, comparator, options)
}

/// The live side of a scan: read whole, or compared as it was read.
enum Live {
    Whole(LiveSnapshot),
    Compared(Compared),
}

impl Live {
    fn coverage(&self) -> &Coverage {
        match self {
            Live::Whole(l) => &l.coverage,
            Live::Compared(c) => &c.coverage,
        }
    }

    fn into_coverage(self) -> Coverage {
        match self {
            Live::Whole(l) => l.coverage,
            Live::Compared(c) => c.coverage,
        }
    }
}

/// What a live read compared as it went ([`fetch_compared`]).
struct Compared {
    coverage: Coverage,
    /// The drifts of each desired object whose live object was read, compared alone (those
    /// that depend on no other object), with the place of that live object in the files (files,
    /// [`compare_files_streamed`]; 0 for a cluster's). Whether they count is decided at the end,
    /// from the whole coverage, as for a read whole.
    early: HashMap<ResourceKey, (u64, Vec<Drift>)>,
    /// The objects whose drifts depend on others ([`Comparator::relations`]) ...
    related: HashSet<ResourceKey>,
    /// ... the objects that make those relations (for a desired side kept compact, the trees
    /// the end comparison needs besides those of `related`; see [`DesiredObject::relations`]) ...
    holders: HashSet<ResourceKey>,
    /// ... and their live objects, compared at the end with the whole comparable set (and, for
    /// files, the live objects whose pairing waited for the namespace rules).
    held: HashMap<ResourceKey, Resource>,
    /// The `resourceVersion` of each live object read that Git holds, with the place of the
    /// object in the files (files; 0 for a cluster's).
    versions: HashMap<ResourceKey, (u64, String)>,
}

impl Compared {
    /// The drifts of the comparable objects: what [`Comparator::compare_all`] gives them with
    /// the live objects read (for each object, the same drifts in the same order).
    fn drifts<T: DesiredObject>(&mut self, comparable: &[T], comparator: &dyn Comparator) -> Vec<Drift> {
        // (Room for the drifts found so far at once: a vector grown by doubling would hold up
        // to twice the report, and copy it, at the largest moment of a scan.)
        let mut drifts = Vec::with_capacity(self.early.values().map(|(_, found)| found.len()).sum());
        let mut late = false;
        for d in comparable {
            if self.related.contains(d.key()) {
                late = true;
            } else {
                match self.early.remove(d.key()) {
                    Some((_, found)) => drifts.extend(found),
                    // Not compared as it was read: with the live object kept for the end, if
                    // any (files, [`compare_files_streamed`]), else none.
                    None => drifts.extend(comparator.compare(&d.tree(), self.held.get(d.key()))),
                }
            }
        }
        if late {
            let (related, holders) = (&self.related, &self.holders);
            let context = T::trees(comparable, &|k| related.contains(k) || holders.contains(k));
            let which: Vec<&Resource> = context.iter().filter(|r| related.contains(&r.key)).collect();
            let held: Vec<Resource> = std::mem::take(&mut self.held).into_values().collect();
            drifts.extend(comparator.compare_some(&context, &which, &held));
        }
        drifts
    }
}

/// Reads the live state part by part ([`LiveSource::fetch_parts`]) and compares each live
/// object of a desired object as it arrives, keeping its drifts instead of the object; objects
/// Git does not hold are dropped at once. The live objects of the objects in `related` are kept
/// for the end.
async fn fetch_compared(
    live: &dyn LiveSource,
    scope: &Scope,
    desired: &[Resource],
    comparator: &dyn Comparator,
    related: HashSet<ResourceKey>,
) -> drift_model::Result<Compared> {
    // A SOPS-encrypted object is never compared (see `compare_into`).
    let index: HashMap<&ResourceKey, &Resource> =
        desired.iter().filter(|r| !drift_model::secret::is_sops_encrypted(&r.object)).map(|r| (&r.key, r)).collect();
    let mut out = Compared {
        coverage: Coverage::default(),
        early: HashMap::new(),
        related,
        holders: HashSet::new(),
        held: HashMap::new(),
        versions: HashMap::new(),
    };
    let mut first = true;
    live.fetch_parts(scope, &mut |part: LiveSnapshot| {
        if std::mem::take(&mut first) {
            out.coverage = part.coverage;
        } else {
            for e in part.coverage.entries {
                out.coverage.set(&GroupKind::new(e.group, e.kind), e.namespace.as_deref(), e.status);
            }
        }
        // The pairs of the part are compared together, on every core ([`compare_pairs`]).
        let mut pairs: Vec<(&Resource, Resource)> = Vec::new();
        let mut paired: HashSet<ResourceKey> = HashSet::new();
        for r in part.resources {
            let Some(d) = index.get(&r.key) else { continue };
            if let Some(v) = resource_version(&r) {
                out.versions.entry(r.key.clone()).or_insert_with(|| (0, v.to_owned()));
            }
            // An object read twice: the first one counts, as in `fetch`.
            if out.related.contains(&r.key) {
                out.held.entry(r.key.clone()).or_insert(r);
            } else if !out.early.contains_key(&r.key) && paired.insert(r.key.clone()) {
                pairs.push((d, r));
            }
        }
        let drifts = compare_pairs(comparator, &pairs);
        for ((_, r), found) in pairs.into_iter().zip(drifts) {
            out.early.insert(r.key, (0, found));
        }
    })
    .await?;
    Ok(out)
}

/// The drifts of each pair (desired, live), in the pairs' order, compared on every core when
/// there are enough of them to be worth a thread each.
fn compare_pairs(comparator: &dyn Comparator, pairs: &[(&Resource, Resource)]) -> Vec<Vec<Drift>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    // (A pair costs tens of microseconds; a thread, about as much as one to start.)
    if cores < 2 || pairs.len() < 32 {
        return pairs.iter().map(|(d, r)| comparator.compare(d, Some(r))).collect();
    }
    let chunk = pairs.len().div_ceil(cores);
    std::thread::scope(|s| {
        let handles: Vec<_> = pairs
            .chunks(chunk)
            .map(|part| s.spawn(move || part.iter().map(|(d, r)| comparator.compare(d, Some(r))).collect::<Vec<_>>()))
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    })
}

/// Asks the live source which custom kinds of the desired state it serves cluster-scoped and
/// adds them to `options.cluster_scoped` (kinds of the built-in table and kinds already there
/// are not asked about).
pub async fn discover_cluster_scoped(live: &dyn LiveSource, desired: &DesiredSnapshot, options: &mut ScanOptions) {
    let mut unknown: Vec<GroupKind> = desired
        .resources
        .iter()
        .filter(|r| !is_cluster_scoped(&r.key.group, &r.key.kind))
        .map(|r| r.key.group_kind())
        .filter(|gk| !options.cluster_scoped.contains(gk))
        .collect();
    unknown.sort();
    unknown.dedup();
    if !unknown.is_empty() {
        options.cluster_scoped.extend(live.cluster_scoped(&unknown).await);
    }
}

/// The pure part of a scan, for callers that already hold both snapshots (`drift diff` on
/// files): the same namespace defaulting, duplicate check, coverage rules and report as
/// [`run_scan`], without copying the snapshots.
pub fn compare_snapshots(
    mut desired: DesiredSnapshot,
    live: LiveSnapshot,
    comparator: &dyn Comparator,
    options: &ScanOptions,
) -> ScanReport {
    let mut report = empty_report(&desired.repository, &live.cluster, options);
    prepare_desired(&mut desired, &mut report, options);
    compare_into(report, desired, Live::Whole(live), comparator, options)
}

/// `drift diff` on files, the live side held whole: the namespace rules of files
/// ([`crate::matching`]), then [`compare_snapshots`]. Every (kind, namespace) Git names is
/// complete, unless a live file could not be read (a fatal warning in `live_warnings`): then
/// nothing is compared, so that nothing looks missing. The live warnings end the report's.
pub fn compare_files(
    mut desired: DesiredSnapshot,
    mut live: Vec<Resource>,
    live_warnings: Vec<SourceWarning>,
    namespace: Option<&str>,
    comparator: &dyn Comparator,
    options: &ScanOptions,
) -> ScanReport {
    options.progress.live_read(live.len() as u64);
    let settled = crate::matching::settle_namespaces(&mut desired.resources, &mut live, namespace);
    let (desired, options, coverage) = settle_files(desired, settled, &live_warnings, options);
    let live = LiveSnapshot { cluster: FILES.to_owned(), resources: live, coverage };
    let report = compare_snapshots(desired, live, comparator, &options);
    with_live_warnings(report, live_warnings)
}

/// [`compare_files`] with the live side read as a stream: `read_live` hands over each live
/// object with its place in the files (file, then document: the order of a whole read), in any
/// order and from any number of threads at once ([`LiveSink`]: each pair is compared on the
/// thread that hands its live object over), and returns the warnings of the read. The report is the one [`compare_files`] gives
/// (a test holds it so), but the live objects are not held: a live object that names a
/// namespace and whose exact key a desired object names with that namespace is paired whatever
/// else the files hold (its namespace proves its kind namespaced, and the rules do not move a
/// desired object that names its namespace), so it is compared as it arrives and dropped. The
/// others whose kind and name Git holds are kept, compact, until the namespace rules have seen
/// the keys of the whole live side. Excluded from pairing at once, and kept: objects whose kind
/// and name a desired object without namespace shares, the targets of an autoscaler
/// ([`Comparator::relations`]), SOPS-encrypted and cluster-scoped kinds. With orphans, a policy
/// on the live side or a comparator without relations, the live side is read whole.
///
/// The desired objects may be trees ([`Resource`]) or kept compact (`drift_manifest::KeptResource`):
/// then each is expanded only while it is compared or checked, and the report is the same. With
/// `reload`, a kept object compared as its live object arrives is let go of
/// ([`DesiredObject::let_go`]) unless its tree is asked for again (an autoscaler, waivers, a
/// desired-side policy); a second live object of its key (the later one in the files counts)
/// has it read again by its provenance, and a digest that no longer matches is a fatal warning
/// that keeps the first comparison.
pub fn compare_files_streamed<T: DesiredObject + Send>(
    mut desired: DesiredSnapshot<T>,
    read_live: impl FnOnce(&LiveSink<'_>) -> Vec<SourceWarning>,
    reload: Option<Reload<'_>>,
    namespace: Option<&str>,
    comparator: &dyn Comparator,
    options: &ScanOptions,
) -> ScanReport {
    let live_policy = options.policy.as_ref().is_some_and(|p| p.checks(crate::policy::Side::Live));
    let relations =
        if options.orphans || live_policy { None } else { T::relations(&mut desired.resources, comparator) };
    let Some(relations) = relations else {
        let all = Mutex::new(Vec::new());
        let warnings = read_live(&|order, r| locked(&all).push((order, r.into_resource())));
        let mut all = all.into_inner().unwrap_or_else(PoisonError::into_inner);
        all.sort_by_key(|(order, _)| *order);
        let live = all.into_iter().map(|(_, r)| r).collect();
        let desired = DesiredSnapshot {
            repository: desired.repository,
            revision: desired.revision,
            resources: desired.resources.into_iter().map(T::into_tree).collect(),
            warnings: desired.warnings,
        };
        return compare_files(desired, live, warnings, namespace, comparator, options);
    };
    type Name = (GroupKind, String);
    let name = |k: &ResourceKey| (k.group_kind(), k.name.clone());
    let related: HashSet<Name> = relations.related.iter().map(name).collect();
    let unnamed: HashSet<Name> =
        desired.resources.iter().filter(|r| r.key().namespace.is_none()).map(|r| name(r.key())).collect();
    // The objects compared as their live object is read, found by the hash of their key (a map
    // of borrowed keys would hold the objects borrowed while they are let go of).
    use std::hash::BuildHasher;
    let hasher = std::collections::hash_map::RandomState::new();
    let mut certain: Vec<(u64, usize)> = Vec::new();
    // (A name is made to be looked for only when there is a set to look in: it copies the key.)
    let unshared = |key: &ResourceKey| {
        (unnamed.is_empty() && related.is_empty()) || {
            let n = name(key);
            !unnamed.contains(&n) && !related.contains(&n)
        }
    };
    for (i, r) in desired.resources.iter().enumerate() {
        let key = r.key();
        if key.namespace.is_some() && !is_cluster_scoped(&key.group, &key.kind) && !r.encrypted() && unshared(key) {
            certain.push((hasher.hash_one(key), i));
        }
    }
    let certain = ByHash::new(certain);
    // Each desired object behind a lock of its own while the live side is read: `read_live`
    // may hand objects over from several threads at once, and each pair is compared on the
    // thread that read its live object. With the object, the comparison made for its key so far
    // (the place of its live object in the files, and its drifts).
    let slots: Vec<Mutex<Slot<T>>> = std::mem::take(&mut desired.resources)
        .into_iter()
        .map(|d| Mutex::new(Slot { desired: d, early: None }))
        .collect();
    // The (kind, name) of every desired object, made by the first thread that reads a live
    // object not compared at once (from the slots: the objects are in them by then). Most live
    // sides of files have none, and the set copies every key's strings.
    let names: std::sync::OnceLock<HashSet<Name>> = std::sync::OnceLock::new();
    let git_names = || names.get_or_init(|| slots.iter().map(|s| name(locked(s).desired.key())).collect());
    let find = |key: &ResourceKey| -> Option<usize> {
        certain.get(hasher.hash_one(key)).find(|i| locked(&slots[*i]).desired.key() == key)
    };
    // An object compared at once is let go of when nothing asks for its tree again (no waivers,
    // no desired-side policy, not an autoscaler) and it can be read again (`reload`) should a second live object
    // of its key come.
    let desired_policy = options.policy.as_ref().is_some_and(|p| p.checks(crate::policy::Side::Desired));
    let letting_go = reload.is_some() && !desired_policy;
    // (A version is noted for each live object Git holds: sized for them at once.)
    let noting = options.live_versions;
    let shared = Mutex::new(Shared {
        versions: HashMap::with_capacity(if noting { certain.len() } else { 0 }),
        ..Shared::default()
    });
    let read = std::sync::atomic::AtomicU64::new(0);
    let live_warnings = read_live(&|order, live: LiveObject<'_>| {
        read.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let key = live.key();
        let found = if key.namespace.is_some() { find(key) } else { None };
        let Some(i) = found else {
            // (No slot is locked here: the set may be made from them.)
            let keep = git_names().contains(&name(key)).then(|| drift_model::CompactResource::new(&live.to_resource()));
            let mut shared = locked(&shared);
            shared.keys.add(key);
            if let Some(c) = keep {
                shared.kept.push((order, c));
            }
            return;
        };
        {
            let mut shared = locked(&shared);
            shared.keys.add(key);
            if noting {
                note_version(&mut shared.versions, key, live.resource_version(), order);
            }
        }
        let mut slot = locked(&slots[i]);
        // The last object of a key in the files counts, as in `compare_all`'s index.
        if slot.early.as_ref().is_none_or(|(seen, _)| *seen < order) {
            let mut reread = Vec::new();
            if read_again(&mut slot.desired, reload, &mut reread) {
                let drifts = match &live {
                    LiveObject::Resource(r) => comparator.compare(&slot.desired.tree(), Some(r)),
                    LiveObject::Tree(t) => slot.desired.compare_live(comparator, t),
                };
                slot.early = Some((order, drifts));
                let d = &mut slot.desired;
                if letting_go && !d.waived() && !relations.holders.contains(key) {
                    d.let_go();
                }
            }
            if !reread.is_empty() {
                locked(&shared).reread.extend(reread.into_iter().map(|w| (order, w)));
            }
        }
    });
    drop(certain);
    let Shared { keys, mut versions, mut kept, mut reread } =
        shared.into_inner().unwrap_or_else(PoisonError::into_inner);
    // (In the order of the files, whatever the order the threads met them in.)
    reread.sort_by_key(|(order, _)| *order);
    let mut reread: Vec<SourceWarning> = reread.into_iter().map(|(_, w)| w).collect();
    // (Sized once, and the objects collected into the slots' own buffer: grown as they came,
    // both would hold twice their size, copied, at the largest moment of the run.)
    let mut early: HashMap<ResourceKey, (u64, Vec<Drift>)> =
        HashMap::with_capacity(slots.iter().filter(|s| locked(s).early.is_some()).count());
    desired.resources = slots
        .into_iter()
        .map(|slot| {
            let Slot { desired: d, early: compared } = slot.into_inner().unwrap_or_else(PoisonError::into_inner);
            if let Some(compared) = compared {
                early.insert(d.key().clone(), compared);
            }
            d
        })
        .collect();
    let read = read.into_inner();
    options.progress.live_read(read);
    kept.sort_by_key(|(order, _)| *order);
    let (orders, mut live): (Vec<u64>, Vec<Resource>) = kept.into_iter().map(|(o, c)| (o, c.expand())).unzip();
    let settled = crate::matching::settle_desired(&mut desired.resources, &keys, namespace);
    crate::matching::place_live(&mut live, &settled.cluster_scoped, namespace);
    let (mut desired, options, coverage) = settle_files(desired, settled, &live_warnings, options);
    let mut held: HashMap<ResourceKey, Resource> = HashMap::new();
    for (order, r) in orders.into_iter().zip(live) {
        if noting {
            note_version(&mut versions, &r.key, resource_version(&r), order);
        }
        // A kept object placed on the key of one compared at once: the later one counts, and
        // the desired object is compared with it at the end (read again if it was let go of).
        if early.get(&r.key).is_some_and(|(seen, _)| *seen < order) {
            let d = desired.resources.iter_mut().find(|d| d.key() == &r.key && !d.held());
            if d.is_none_or(|d| read_again(d, reload, &mut reread)) {
                early.remove(&r.key);
            }
        }
        if !early.contains_key(&r.key) {
            held.insert(r.key.clone(), r);
        }
    }
    desired.warnings.extend(reread);
    let mut report = empty_report(&desired.repository, FILES, &options);
    prepare_desired(&mut desired, &mut report, &options);
    // The relations again, on the settled keys. A comparator that has none now (it had some
    // before the namespace rules) gets every object not compared at once compared with the
    // whole set; an object compared at once keeps the drifts it got, its live object is gone.
    let settled = T::relations(&mut desired.resources, comparator).unwrap_or_else(|| {
        let all: HashSet<ResourceKey> = desired.resources.iter().map(|r| r.key().clone()).collect();
        drift_model::desired::Relations { related: all.clone(), holders: all }
    });
    let compared = Compared {
        coverage,
        related: settled.related.into_iter().filter(|k| !early.contains_key(k)).collect(),
        holders: settled.holders,
        early,
        held,
        versions,
    };
    let report = compare_into(report, desired, Live::Compared(compared), comparator, &options);
    with_live_warnings(report, live_warnings)
}

/// Places found by a hash (of their key, in [`compare_files_streamed`]): sorted by hash, then
/// place, with where the hashes of each bucket of their top bits start, so that a lookup reads
/// the one or two entries of its bucket rather than the dozen scattered ones of a binary search.
struct ByHash {
    entries: Vec<(u64, usize)>,
    shift: u32,
    starts: Vec<usize>,
}

impl ByHash {
    fn new(mut entries: Vec<(u64, usize)>) -> Self {
        entries.sort_unstable();
        // About one bucket an entry (at least two buckets: a shift of 64 would overflow).
        let bits = entries.len().next_power_of_two().trailing_zeros().max(1);
        let shift = 64 - bits;
        let mut starts = vec![0; (1 << bits) + 1];
        for (h, _) in &entries {
            starts[(h >> shift) as usize + 1] += 1;
        }
        for b in 1..starts.len() {
            starts[b] += starts[b - 1];
        }
        ByHash { entries, shift, starts }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    /// The places of hash `h`, the first place first (the first definition of a key counts, as
    /// in `prepare_desired`).
    fn get(&self, h: u64) -> impl Iterator<Item = usize> + '_ {
        let b = (h >> self.shift) as usize;
        self.entries[self.starts[b]..self.starts[b + 1]].iter().filter(move |(x, _)| *x == h).map(|(_, i)| *i)
    }
}

/// Reads the desired objects of one document again by where one of them came from (every
/// object of that document: the items of a `List` share it), for [`compare_files_streamed`];
/// called from the threads that hand over live objects.
pub type Reload<'r> = &'r (dyn Fn(&drift_model::Provenance) -> Vec<Resource> + Sync + 'r);

/// Where the reader of [`compare_files_streamed`] hands over each live object with its place in
/// the files (`file << 32 | document`). It may be called from several threads at once: the pair
/// is compared on the calling thread, so a reader that parses files on every core compares on
/// every core too.
pub type LiveSink<'s> = dyn Fn(u64, LiveObject<'_>) + Sync + 's;

/// A live object handed to a [`LiveSink`]: read whole ([`Resource`]), or read for comparing
/// only, as a tree that borrows the text of its file ([`ObjectTree`]). A tree paired at once is
/// compared as it is ([`Comparator::compare_tree`]); one kept for later is made a `Resource`.
#[derive(Debug)]
pub enum LiveObject<'t> {
    /// A live object as a [`Resource`].
    Resource(Resource),
    /// A live object as a tree borrowing its file's text.
    Tree(ObjectTree<'t>),
}

impl LiveObject<'_> {
    /// Its key.
    pub fn key(&self) -> &ResourceKey {
        match self {
            LiveObject::Resource(r) => &r.key,
            LiveObject::Tree(t) => &t.key,
        }
    }

    /// Its `metadata.resourceVersion`, when it has one.
    fn resource_version(&self) -> Option<&str> {
        match self {
            LiveObject::Resource(r) => resource_version(r),
            LiveObject::Tree(t) => version_of(t.tree.root()),
        }
    }

    /// It as a [`Resource`] (a tree copied into one).
    pub fn into_resource(self) -> Resource {
        match self {
            LiveObject::Resource(r) => r,
            LiveObject::Tree(t) => t.to_resource(),
        }
    }

    fn to_resource(&self) -> std::borrow::Cow<'_, Resource> {
        match self {
            LiveObject::Resource(r) => std::borrow::Cow::Borrowed(r),
            LiveObject::Tree(t) => std::borrow::Cow::Owned(t.to_resource()),
        }
    }
}

impl From<Resource> for LiveObject<'_> {
    fn from(r: Resource) -> Self {
        LiveObject::Resource(r)
    }
}

/// A desired object of [`compare_files_streamed`] while the live side is read, with the
/// comparison made for its key so far: the place of the live object compared (the last one in
/// the files counts) and the drifts.
struct Slot<T> {
    desired: T,
    early: Option<(u64, Vec<Drift>)>,
}

/// What the threads of [`compare_files_streamed`] gather besides the comparisons, each item with
/// the place of its live object in the files.
#[derive(Default)]
struct Shared {
    keys: crate::matching::LiveKeys,
    versions: HashMap<ResourceKey, (u64, String)>,
    kept: Vec<(u64, drift_model::CompactResource)>,
    reread: Vec<(u64, SourceWarning)>,
}

/// A lock, taken whether or not a thread panicked while holding it (the panic reaches the
/// caller anyway, through the thread that read).
fn locked<V>(m: &Mutex<V>) -> MutexGuard<'_, V> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Makes sure `d` holds its tree, reading it again if it was let go of; `false`, with a fatal
/// warning, when it cannot be read again as it was (the file changed or is gone since).
fn read_again<T: DesiredObject>(d: &mut T, reload: Option<Reload<'_>>, warnings: &mut Vec<SourceWarning>) -> bool {
    if d.held() {
        return true;
    }
    let again = reload.map(|f| f(d.provenance())).unwrap_or_default();
    match again.into_iter().find(|r| r.key == *d.key()) {
        // (Checked as the object's own: its encrypted document when opened from SOPS.)
        Some(r) if d.same_as(&r) => {
            d.restore(&r);
            true
        }
        _ => {
            let p = d.provenance();
            let mut w = SourceWarning::error(
                drift_model::ErrorKind::InvalidInput,
                format!(
                    "{} has a second live object; its manifest, read again to compare it, changed or is gone: \
                     the first live object's comparison is kept",
                    d.key()
                ),
            );
            if let Some(path) = &p.path {
                w = w.at(path.clone(), p.document, None);
            }
            warnings.push(w);
            false
        }
    }
}

/// The cluster name of a live state read from files.
const FILES: &str = "files";

/// The `resourceVersion` of the first live object of a key in the files (as [`live_versions`]
/// takes it from a whole read).
fn note_version(
    versions: &mut HashMap<ResourceKey, (u64, String)>,
    key: &ResourceKey,
    version: Option<&str>,
    order: u64,
) {
    if let Some(v) = version
        && versions.get(key).is_none_or(|(seen, _)| *seen > order)
    {
        versions.insert(key.clone(), (order, v.to_owned()));
    }
}

/// What the namespace rules decided, applied to a files comparison: their warnings with the
/// desired state's, the custom kinds they found cluster-scoped in the options, the scan's
/// namespaces, and the coverage of a whole read.
fn settle_files<T: DesiredObject>(
    mut desired: DesiredSnapshot<T>,
    settled: crate::matching::Settled,
    live_warnings: &[SourceWarning],
    options: &ScanOptions,
) -> (DesiredSnapshot<T>, ScanOptions, Coverage) {
    desired.warnings.extend(settled.warnings);
    let mut options = options.clone();
    options.cluster_scoped = settled.cluster_scoped;
    place_namespaces(&mut desired.resources, &options);
    let coverage = Coverage::of_whole_read(&desired.kind_scope(), live_warnings);
    (desired, options, coverage)
}

fn with_live_warnings(mut report: ScanReport, live_warnings: Vec<SourceWarning>) -> ScanReport {
    report.warnings.extend(live_warnings);
    report.summary.warnings = report.warnings.len();
    report
}

fn empty_report(repository: &str, cluster: &str, options: &ScanOptions) -> ScanReport {
    let started_at = (options.clock)();
    ScanReport {
        scan_id: options.scan_id.clone(),
        cluster: cluster.to_owned(),
        repository: repository.to_owned(),
        revision: None,
        started_at,
        finished_at: started_at,
        outcome: ScanOutcome::Failed,
        drifts: Vec::new(),
        coverage: Default::default(),
        warnings: Vec::new(),
        desired: Vec::new(),
        desired_digests: Vec::new(),
        desired_complete: false,
        uncomparable: Vec::new(),
        summary: Summary::default(),
        findings: Vec::new(),
        policy_sides: Vec::new(),
        live_versions: Vec::new(),
    }
}

/// The namespace rules of a scan: objects of cluster-scoped kinds (the built-in table, then
/// `options.cluster_scoped`) lose the namespace they name; namespaced objects that name none go
/// to `options.default_namespace`. [`run_scan`] and [`compare_snapshots`] apply them; callers
/// that need the scope before (to read the live state) apply them first.
pub fn place_namespaces<T: DesiredObject>(resources: &mut [T], options: &ScanOptions) {
    for r in resources {
        let key = r.key();
        let cluster_scoped = is_cluster_scoped(&key.group, &key.kind)
            || options.cluster_scoped.iter().any(|gk| gk.group == key.group && gk.kind == key.kind);
        // (The key is taken to change only when it changes: a kept object forgets what the
        // comparator said of it when it does.)
        if cluster_scoped && key.namespace.is_some() {
            r.key_mut().namespace = None;
        } else if !cluster_scoped && key.namespace.is_none() {
            r.key_mut().namespace = Some(options.default_namespace.clone());
        }
    }
}

/// Namespaces, duplicates, completeness (the live scope the desired state implies is then
/// [`DesiredSnapshot::scope`]).
fn prepare_desired<T: DesiredObject>(
    snapshot: &mut DesiredSnapshot<T>,
    report: &mut ScanReport,
    options: &ScanOptions,
) {
    report.revision = snapshot.revision.clone();
    place_namespaces(&mut snapshot.resources, options);
    // The keys sorted with their places (borrowed: the report's list of them is sorted anyway),
    // so that a key defined twice sorts its first definition first and the later ones after it.
    let resources = &snapshot.resources;
    let mut sorted: Vec<(&ResourceKey, usize)> = resources.iter().map(|r| r.key()).zip(0..).collect();
    sorted.sort_unstable();
    let mut twice = vec![false; resources.len()];
    for pair in sorted.windows(2) {
        if pair[0].0 == pair[1].0 {
            twice[pair[1].1] = true;
        }
    }
    (report.desired, report.desired_digests) =
        sorted.iter().filter(|(_, i)| !twice[*i]).map(|(k, i)| ((*k).clone(), resources[*i].digest())).unzip();
    for (r, _) in resources.iter().zip(&twice).filter(|(_, twice)| **twice) {
        let provenance = r.provenance();
        report.warnings.push(
            SourceWarning::error(
                drift_model::ErrorKind::InvalidInput,
                format!("{} is defined twice; the first definition is used", r.key()),
            )
            .at(provenance.path.clone().unwrap_or_default(), provenance.document, None),
        );
    }
    let mut at = 0;
    snapshot.resources.retain(|_| {
        at += 1;
        !twice[at - 1]
    });
    report.desired_complete = !snapshot.warnings.iter().any(|w| w.fatal);
    report.warnings.extend(snapshot.warnings.iter().cloned());
}

fn compare_into<T: DesiredObject>(
    mut report: ScanReport,
    snapshot: DesiredSnapshot<T>,
    mut live: Live,
    comparator: &dyn Comparator,
    options: &ScanOptions,
) -> ScanReport {
    for entry in live.coverage().incomplete() {
        let ns = entry.namespace.as_deref().map(|n| format!(" in {n}")).unwrap_or_default();
        let kind = match &entry.status {
            drift_model::CoverageStatus::Forbidden { .. } => drift_model::ErrorKind::PermissionDenied,
            drift_model::CoverageStatus::NotServed { .. } => drift_model::ErrorKind::NotFound,
            _ => drift_model::ErrorKind::Unavailable,
        };
        let why = match &entry.status {
            drift_model::CoverageStatus::Forbidden { message }
            | drift_model::CoverageStatus::NotServed { message }
            | drift_model::CoverageStatus::Failed { message } => message.as_str(),
            drift_model::CoverageStatus::Complete => "",
        };
        report.warnings.push(SourceWarning::error(
            kind,
            format!(
                "live {}{ns} not read ({}): {why}",
                GroupKind::new(&entry.group, &entry.kind),
                entry.status.label()
            ),
        ));
    }

    // Only objects whose (kind, namespace) was read completely can be compared: an object that
    // could not be read is not "missing".
    // A SOPS-encrypted manifest holds ciphertext: listed as uncomparable, never compared.
    // (Taken out of the objects' own buffer: partitioned into two new vectors grown as they
    // came, the objects would be held twice over at the largest moment of a scan of files.)
    let mut readable = snapshot.resources;
    let encrypted: Vec<T> = readable.extract_if(.., |r| r.encrypted()).collect();
    for r in &encrypted {
        report.warnings.push(drift_model::sops::note(&r.tree(), options.sops_recipients.as_deref()));
    }
    report.uncomparable = encrypted.iter().map(|r| r.key().clone()).collect();
    report.uncomparable.sort_unstable();
    if let Some(policy) = &options.policy {
        // (`run_scan` reads the live state whole when a policy checks the live side.)
        let live_objects: &[Resource] = match &live {
            Live::Whole(l) => &l.resources,
            Live::Compared(_) => &[],
        };
        check_policies(&mut report, policy, &readable, live_objects, live.coverage());
    }
    let comparable: Vec<T> = readable
        .into_iter()
        .filter(|r| live.coverage().is_complete(&r.key().group, &r.key().kind, r.key().namespace.as_deref()))
        .collect();
    options.progress.comparing(comparable.len() as u64);
    // (Every tree is asked for only with the live side read whole, which a desired side kept
    // compact never is: `compare_files_streamed` expands it first.)
    report.drifts = match &mut live {
        Live::Whole(l) => comparator.compare_all(&T::trees(&comparable, &|_| true), &l.resources),
        Live::Compared(c) => c.drifts(&comparable, comparator),
    };
    if options.live_versions {
        report.live_versions = live_versions(&report.desired, &live);
    }
    if options.orphans && options.elsewhere_unknown {
        report.desired_complete = false;
    } else if let (true, Live::Whole(l)) = (options.orphans, &live) {
        // (`run_scan` reads the live state whole when orphans are asked for.)
        let declared = [report.desired.as_slice(), &options.declared_elsewhere];
        let trees = T::trees(&comparable, &|_| true);
        let candidates = crate::orphans::unmanaged(&declared, &trees, &l.resources, &l.coverage);
        report.drifts.extend(candidates.into_iter().filter_map(|r| comparator.unmanaged(r)));
    }
    options.progress.compared(comparable.len() as u64);
    sort_drifts(&mut report.drifts);
    let now = (options.clock)();
    for r in comparable.iter().filter(|r| r.waived()) {
        crate::waiver::apply(&mut report, std::slice::from_ref(&*r.tree()), now);
    }
    let compared = comparable.len();
    report.coverage = live.into_coverage();
    let fatal = report.warnings.iter().any(|w| w.fatal);
    report.outcome = if !fatal {
        ScanOutcome::Success
    } else if compared == 0 && !report.desired.is_empty() {
        // Git holds objects but none of them could be compared: the live source is down.
        ScanOutcome::Failed
    } else {
        ScanOutcome::Partial
    };
    finish(report, compared, options)
}

/// Sorts a report's drifts in the order of `ResourceKey` (group, kind, namespace, name), then
/// path and type, keeping the order of equal ones.
fn sort_drifts(drifts: &mut [Drift]) {
    // Its fields borrowed.
    fn order(d: &Drift) -> (&str, &str, Option<&str>, &str, &str, drift_model::DriftType) {
        (&d.api_group, &d.resource.kind, d.resource.namespace.as_deref(), &d.resource.name, &d.path, d.drift_type)
    }
    sort_by_places(drifts, |a, b| order(a).cmp(&order(b)));
}

/// What `v.sort_by(compare)` does (a stable sort), for large elements: their places are sorted,
/// then each element is moved once to where it goes. A drift is some hundreds of bytes, which a
/// sort of the drifts themselves moves at each of its passes (the largest part of what `drift
/// diff` did on one core after the pairs were compared, at 10,000 pairs).
fn sort_by_places<T>(v: &mut [T], compare: impl Fn(&T, &T) -> std::cmp::Ordering) {
    let mut from: Vec<usize> = (0..v.len()).collect();
    from.sort_by(|&a, &b| compare(&v[a], &v[b]));
    // `from[i]`'s element goes to `i`: each cycle of the permutation followed once, one swap a
    // place.
    const DONE: usize = usize::MAX;
    for start in 0..v.len() {
        let mut at = start;
        while from[at] != DONE {
            let next = from[at];
            from[at] = DONE;
            if next == start {
                break;
            }
            // `at` takes its element; the one it held (the start's) moves on along the cycle.
            v.swap(at, next);
            at = next;
        }
    }
}

/// The `metadata.resourceVersion` of a live object.
fn resource_version(r: &Resource) -> Option<&str> {
    version_of(&*r.object)
}

/// The `metadata.resourceVersion` of a live object read through [`JsonView`], when not empty.
fn version_of<'a>(object: impl JsonView<'a>) -> Option<&'a str> {
    object.get("metadata")?.get("resourceVersion")?.as_str().filter(|v| !v.is_empty())
}

/// [`ScanReport::live_versions`]: for each desired key, the version of the live object read
/// (the first one, as compared); empty when no live object had one.
fn live_versions(desired: &[ResourceKey], live: &Live) -> Vec<String> {
    let versions_of = |found: &dyn Fn(&ResourceKey) -> Option<String>| -> Vec<String> {
        desired.iter().map(|k| found(k).unwrap_or_default()).collect()
    };
    match live {
        Live::Whole(l) => {
            let mut found = HashMap::new();
            for r in &l.resources {
                if let Some(v) = resource_version(r) {
                    found.entry(&r.key).or_insert(v);
                }
            }
            if found.is_empty() {
                return Vec::new();
            }
            versions_of(&|k| found.get(k).map(|v| (*v).to_owned()))
        }
        // (Read where the compared versions are: a second map of them all would be as large.)
        Live::Compared(c) if c.versions.is_empty() => Vec::new(),
        Live::Compared(c) => versions_of(&|k| c.versions.get(k).map(|(_, v)| v.clone())),
    }
}

/// The policy findings of a scan: each readable desired object on the desired side, and the
/// live counterpart of each desired object, read completely, on the live side (live objects Git
/// does not declare are not checked: `orphans` reports those).
fn check_policies<T: DesiredObject>(
    report: &mut ScanReport,
    policy: &crate::policy::Policy,
    desired: &[T],
    live: &[drift_model::Resource],
    coverage: &Coverage,
) {
    use crate::policy::Side;
    report.policy_sides = policy.sides().to_vec();
    if policy.checks(Side::Desired) {
        report.findings.extend(desired.iter().flat_map(|r| policy.check(&r.tree(), Side::Desired)));
    }
    if policy.checks(Side::Live) {
        let declared = |r: &&drift_model::Resource| {
            report.desired.binary_search(&r.key).is_ok()
                && report.uncomparable.binary_search(&r.key).is_err()
                && coverage.is_complete(&r.key.group, &r.key.kind, r.key.namespace.as_deref())
        };
        let found: Vec<_> = live.iter().filter(declared).flat_map(|r| policy.check(r, Side::Live)).collect();
        report.findings.extend(found);
    }
    sort_findings(&mut report.findings);
}

fn sort_findings(findings: &mut [crate::policy::Finding]) {
    findings.sort_by(|a, b| {
        (&a.resource, a.side, a.rule, &a.path, &a.container).cmp(&(&b.resource, b.side, b.rule, &b.path, &b.container))
    });
}

fn finish(mut report: ScanReport, compared: usize, options: &ScanOptions) -> ScanReport {
    report.finished_at = (options.clock)();
    report.summary = Summary::of(&report.drifts, compared, report.warnings.len());
    report
}

/// A report about one object only, for watch mode: the object is re-compared after a live
/// change, and only its own drifts may be opened or resolved (`desired` names it alone and
/// `desired_complete` is false, so [`ScanReport::may_resolve`] leaves every other object as it
/// was).
#[allow(clippy::too_many_arguments)]
pub fn targeted_report(
    all_desired: &[drift_model::Resource],
    desired: &drift_model::Resource,
    live: Option<&drift_model::Resource>,
    comparator: &dyn Comparator,
    cluster: &str,
    repository: &str,
    revision: Option<String>,
    options: &ScanOptions,
) -> ScanReport {
    let mut report = empty_report(repository, cluster, options);
    report.revision = revision;
    report.desired = vec![desired.key.clone()];
    report.desired_digests = vec![desired.digest()];
    report.desired_complete = false;
    report.coverage.set(
        &desired.key.group_kind(),
        desired.key.namespace.as_deref(),
        drift_model::CoverageStatus::Complete,
    );
    if drift_model::secret::is_sops_encrypted(&desired.object) {
        report.uncomparable = vec![desired.key.clone()];
        report.warnings.push(drift_model::sops::note(desired, options.sops_recipients.as_deref()));
        report.outcome = ScanOutcome::Success;
        return finish(report, 0, options);
    }
    report.drifts = comparator.compare_in(all_desired, desired, live);
    report.drifts.sort_by(|a, b| (&a.path, a.drift_type).cmp(&(&b.path, b.drift_type)));
    if let Some(policy) = &options.policy {
        use crate::policy::Side;
        report.policy_sides = policy.sides().to_vec();
        if policy.checks(Side::Desired) {
            report.findings.extend(policy.check(desired, Side::Desired));
        }
        if let Some(live) = live.filter(|_| policy.checks(Side::Live)) {
            report.findings.extend(policy.check(live, Side::Live));
        }
        sort_findings(&mut report.findings);
    }
    crate::waiver::apply(&mut report, std::slice::from_ref(desired), (options.clock)());
    report.outcome = ScanOutcome::Success;
    finish(report, 1, options)
}

/// Applies the scan's namespace rules to a desired snapshot (what [`run_scan`] does first) and
/// returns the scope it implies; for callers that watch and re-compare objects one by one.
pub fn prepare(snapshot: &mut DesiredSnapshot, options: &ScanOptions) -> Scope {
    let mut scratch = empty_report(&snapshot.repository, "", options);
    prepare_desired(snapshot, &mut scratch, options);
    snapshot.scope()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use super::*;
    use crate::{Engine, EngineConfig};
    use drift_model::{CoverageStatus, Resource};
    use serde_json::json;

    proptest::proptest! {
        /// A lookup by hash finds what a scan of the entries finds, in the order of their places.
        #[test]
        fn a_lookup_by_hash_finds_what_a_scan_finds(
            entries in proptest::collection::vec((0u64..8, 0usize..50), 0..300),
            spread in 0u32..61,
        ) {
            // Hashes from few values spread over the top bits (buckets shared and not).
            let entries: Vec<(u64, usize)> = entries.into_iter().map(|(h, i)| (h << spread | h, i)).collect();
            let found = ByHash::new(entries.clone());
            proptest::prop_assert_eq!(found.len(), entries.len());
            for h in (0u64..8).map(|h| h << spread | h) {
                let mut expected: Vec<usize> = entries.iter().filter(|(x, _)| *x == h).map(|(_, i)| *i).collect();
                expected.sort_unstable();
                proptest::prop_assert_eq!(found.get(h).collect::<Vec<_>>(), expected);
            }
        }

        /// The sort by places is the standard library's stable sort: the same order, equal
        /// elements in the order they had.
        #[test]
        fn a_sort_by_places_is_the_stable_sort(keys in proptest::collection::vec(0u8..6, 0..200)) {
            let v: Vec<(u8, usize)> = keys.into_iter().zip(0..).collect();
            let mut expected = v.clone();
            expected.sort_by_key(|a| a.0);
            let mut got = v;
            sort_by_places(&mut got, |a, b| a.0.cmp(&b.0));
            proptest::prop_assert_eq!(got, expected);
        }
    }

    fn cm(ns: &str) -> Resource {
        Resource::from_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": ns}, "data": {"a": "1"}}))
        .unwrap()
    }

    /// The pairs of a live part compared on every core give each pair's drifts in the pairs'
    /// order, as one thread does (below the threshold and above it, with drifts and without).
    #[test]
    fn pairs_compared_on_every_core_are_compared_as_one_thread_compares_them() {
        let engine = Engine::new(&EngineConfig::default()).unwrap();
        let object = |i: usize, v: usize| {
            Resource::from_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("c{i}"), "namespace": "n"}, "data": {"a": format!("{v}")}}))
            .unwrap()
        };
        for n in [0, 5, 31, 32, 200] {
            let desired: Vec<Resource> = (0..n).map(|i| object(i, 1)).collect();
            let pairs: Vec<(&Resource, Resource)> =
                desired.iter().enumerate().map(|(i, d)| (d, object(i, i % 3))).collect();
            let one: Vec<Vec<Drift>> = pairs.iter().map(|(d, r)| engine.compare(d, Some(r))).collect();
            let all = compare_pairs(&engine, &pairs);
            assert_eq!(all, one, "{n} pairs");
            assert_eq!(all.iter().filter(|d| !d.is_empty()).count(), (0..n).filter(|i| i % 3 != 1).count());
        }
    }

    /// An object defined more than once: the first definition counts, each later one is
    /// warned of, in the order of the files; the report lists each key once, sorted.
    #[test]
    fn a_key_defined_again_keeps_its_first_definition_and_warns_of_each_later_one() {
        let at = |name: &str, ns: &str, v: &str, file: &str| {
            let mut r = Resource::from_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": ns}, "data": {"v": v}}))
            .unwrap();
            r.provenance.path = Some(file.into());
            r
        };
        let desired = DesiredSnapshot {
            repository: "r".into(),
            revision: None,
            resources: vec![
                at("b", "n", "first", "1.yaml"),
                at("a", "n", "only", "2.yaml"),
                at("b", "n", "second", "3.yaml"),
                at("c", "m", "only", "4.yaml"),
                at("b", "n", "third", "5.yaml"),
            ],
            warnings: Vec::new(),
        };
        let mut live = LiveSnapshot {
            cluster: "c".into(),
            resources: vec![at("b", "n", "first", "live.yaml")],
            coverage: Default::default(),
        };
        for ns in ["n", "m"] {
            live.coverage.set(&GroupKind::new("", "ConfigMap"), Some(ns), CoverageStatus::Complete);
        }
        let engine = Engine::new(&EngineConfig::default()).unwrap();
        let report = compare_snapshots(desired, live, &engine, &ScanOptions::new("s"));
        let names: Vec<(&str, &str)> =
            report.desired.iter().map(|k| (k.namespace.as_deref().unwrap(), k.name.as_str())).collect();
        assert_eq!(names, [("m", "c"), ("n", "a"), ("n", "b")]);
        assert_eq!(report.desired_digests.len(), 3);
        let twice: Vec<&str> = report
            .warnings
            .iter()
            .filter(|w| w.message.contains("defined twice"))
            .map(|w| w.path.as_deref().unwrap())
            .collect();
        assert_eq!(twice, ["3.yaml", "5.yaml"]);
        // The first definition is the one compared: its data is the live object's (the others
        // are compared too: missing from the cluster).
        assert!(report.drifts.iter().all(|d| d.resource.name != "b"), "{:?}", report.drifts);
        assert_eq!(report.drifts.iter().filter(|d| d.drift_type == drift_model::DriftType::MissingResource).count(), 2);
    }

    fn scan_with(coverage: &[(&str, CoverageStatus)]) -> ScanReport {
        let desired = DesiredSnapshot {
            repository: "r".into(),
            revision: None,
            resources: coverage.iter().map(|(ns, _)| cm(ns)).collect(),
            warnings: Vec::new(),
        };
        let mut live = LiveSnapshot { cluster: "c".into(), resources: Vec::new(), coverage: Default::default() };
        for (ns, status) in coverage {
            live.coverage.set(&GroupKind::new("", "ConfigMap"), Some(ns), status.clone());
            if *status == CoverageStatus::Complete {
                live.resources.push(cm(ns));
            }
        }
        let engine = Engine::new(&EngineConfig::default()).unwrap();
        compare_snapshots(desired, live, &engine, &ScanOptions::new("s"))
    }

    fn named(name: &str, ns: &str) -> Resource {
        Resource::from_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns}}))
        .unwrap()
    }

    #[test]
    fn orphans_are_unmanaged_drifts_resolved_only_when_their_pair_was_read() {
        let engine = Engine::new(&EngineConfig::default()).unwrap();
        let desired = || DesiredSnapshot {
            repository: "r".into(),
            revision: None,
            resources: vec![named("kept", "a")],
            warnings: Vec::new(),
        };
        let gk = GroupKind::new("", "ConfigMap");
        let live = |objects: Vec<Resource>, status: CoverageStatus| {
            let mut live = LiveSnapshot { cluster: "c".into(), resources: objects, coverage: Default::default() };
            live.coverage.set(&gk, Some("a"), status);
            live
        };
        let mut options = ScanOptions::new("s");
        let found = live(vec![named("kept", "a"), named("stray", "a")], CoverageStatus::Complete);
        let off = compare_snapshots(desired(), found.clone(), &engine, &options);
        assert!(off.drifts.is_empty(), "off unless asked for");
        options.orphans = true;
        let on = compare_snapshots(desired(), found, &engine, &options);
        assert_eq!(on.drifts.len(), 1);
        assert_eq!(on.drifts[0].drift_type, drift_model::DriftType::UnmanagedResource);
        assert_eq!(on.drifts[0].severity, drift_model::Severity::Medium);
        assert_eq!(on.drifts[0].resource.name, "stray");
        assert_eq!(on.drifts[0].recommended_action, drift_model::RecommendedAction::Observe);
        let stray = named("stray", "a").key;
        let failed = live(vec![], CoverageStatus::Failed { message: "503".into() });
        let unread = compare_snapshots(desired(), failed, &engine, &options);
        assert!(unread.drifts.is_empty());
        assert!(!unread.may_resolve(&stray), "not seen because its namespace was not read: not gone");
        let gone =
            compare_snapshots(desired(), live(vec![named("kept", "a")], CoverageStatus::Complete), &engine, &options);
        assert!(gone.may_resolve(&stray), "read completely and not there: gone");
        let removed = named("other", "elsewhere").key;
        assert!(gone.may_resolve(&removed), "an object of a pair no longer in scope resolves as before");
    }

    #[test]
    fn a_sops_encrypted_secret_is_neither_compared_nor_resolved_nor_an_orphan() {
        let engine = Engine::new(&EngineConfig::default()).unwrap();
        let encrypted = Resource::from_object(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db", "namespace": "a"},
            "data": {"password": "ENC[AES256_GCM,data:Zm9v,iv:YmFy,tag:YmF6,type:str]"},
            "sops": {"mac": "ENC[AES256_GCM,data:eA==,iv:eQ==,tag:eg==,type:str]",
                     "lastmodified": "2026-11-01T00:00:00Z", "age": [{"recipient": "age1xyz", "enc": "-----"}]}}))
        .unwrap();
        let sealed = Resource::from_object(json!({"apiVersion": "bitnami.com/v1alpha1", "kind": "SealedSecret",
            "metadata": {"name": "api-token", "namespace": "a"}, "spec": {"encryptedData": {"t": "AgB="}}}))
        .unwrap();
        let live_secret = |name: &str| {
            Resource::from_object(json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": name, "namespace": "a"}, "data": {"password": "aHVudGVyMg=="}}))
            .unwrap()
        };
        let desired = DesiredSnapshot {
            repository: "r".into(),
            revision: None,
            resources: vec![encrypted.clone(), sealed],
            warnings: Vec::new(),
        };
        let mut live = LiveSnapshot {
            cluster: "c".into(),
            resources: vec![live_secret("db"), live_secret("api-token")],
            coverage: Default::default(),
        };
        live.coverage.set(&GroupKind::new("", "Secret"), Some("a"), CoverageStatus::Complete);
        live.coverage.set(&GroupKind::new("bitnami.com", "SealedSecret"), Some("a"), CoverageStatus::Complete);
        let mut options = ScanOptions::new("s");
        options.orphans = true;
        let report = compare_snapshots(desired, live, &engine, &options);
        let types: Vec<_> = report.drifts.iter().map(|d| (d.resource.name.as_str(), d.drift_type)).collect();
        assert_eq!(
            types,
            vec![("api-token", drift_model::DriftType::MissingResource)],
            "no false secret_drift, and neither Secret is unmanaged (the SealedSecret's is its controller's)"
        );
        assert_eq!(report.uncomparable, vec![encrypted.key.clone()]);
        assert!(!report.may_resolve(&encrypted.key), "its drifts are left as they were");
        assert!(report.warnings.iter().any(|w| !w.fatal && w.message.contains("not comparable without the key")));
        let one = targeted_report(&[], &encrypted, None, &engine, "c", "r", None, &options);
        assert!(one.drifts.is_empty() && !one.may_resolve(&encrypted.key), "the watch neither");
    }

    /// A live source that hands its objects over one (kind, namespace) at a time, in reverse
    /// order, with one object twice (the first copy counts), as a source reading pair by pair
    /// does; or, `whole`, as one part (the default of `fetch_parts`).
    #[derive(Debug)]
    struct Parts {
        inner: drift_model::memory::MemoryLiveSource,
        whole: bool,
    }

    #[async_trait::async_trait]
    impl LiveSource for Parts {
        fn cluster(&self) -> &str {
            self.inner.cluster()
        }
        async fn fetch(&self, scope: &Scope) -> drift_model::Result<LiveSnapshot> {
            self.inner.fetch(scope).await
        }
        async fn fetch_parts(
            &self,
            scope: &Scope,
            part: &mut (dyn FnMut(LiveSnapshot) + Send),
        ) -> drift_model::Result<()> {
            let all = self.inner.fetch(scope).await?;
            if self.whole {
                part(all);
                return Ok(());
            }
            for entry in all.coverage.entries.iter().rev() {
                let mut coverage = Coverage::default();
                coverage.set(
                    &GroupKind::new(&entry.group, &entry.kind),
                    entry.namespace.as_deref(),
                    entry.status.clone(),
                );
                let mut resources: Vec<Resource> = all
                    .resources
                    .iter()
                    .filter(|r| {
                        r.key.group == entry.group && r.key.kind == entry.kind && r.key.namespace == entry.namespace
                    })
                    .cloned()
                    .collect();
                if let Some(first) = resources.first().cloned() {
                    let mut stale = first.clone();
                    Arc::make_mut(&mut stale.object)["metadata"]["labels"] = json!({"stale": "copy"});
                    resources.insert(1, stale);
                }
                part(LiveSnapshot { cluster: all.cluster.clone(), resources, coverage });
            }
            Ok(())
        }
    }

    /// The engine without relations: `run_scan` then reads the live state whole, as before.
    #[derive(Debug)]
    struct Whole(Engine);

    impl Comparator for Whole {
        fn compare(&self, desired: &Resource, live: Option<&Resource>) -> Vec<drift_model::Drift> {
            self.0.compare(desired, live)
        }
        fn compare_all(&self, desired: &[Resource], live: &[Resource]) -> Vec<drift_model::Drift> {
            self.0.compare_all(desired, live)
        }
    }

    /// Runs a future of the in-memory sources (they never wait) to its end.
    fn ready<T>(future: impl std::future::Future<Output = T>) -> T {
        let mut future = std::pin::pin!(future);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        loop {
            if let std::task::Poll::Ready(v) = future.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }

    #[test]
    fn comparing_live_objects_as_they_are_read_finds_what_a_whole_read_finds() {
        let obj = |v: serde_json::Value| Resource::from_object(v).unwrap();
        let deploy = |ns: &str, name: &str, replicas: u32, image: &str| {
            obj(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
                "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "a", "image": image}]}}}}))
        };
        let hpa = |ns: &str, target: &str| {
            obj(json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": target, "namespace": ns},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                         "minReplicas": 1, "maxReplicas": 9}}))
        };
        let cm = |ns: &str, name: &str, mode: &str| {
            obj(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
                "data": {"mode": mode}}))
        };
        let sops = obj(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "a"},
            "data": {"k": "ENC[AES256_GCM,data:Zm9v,iv:YmFy,tag:YmF6,type:str]"},
            "sops": {"mac": "ENC[AES256_GCM,data:eA==,iv:eQ==,tag:eg==,type:str]", "lastmodified": "2026-11-01T00:00:00Z"}}));
        let desired = vec![
            deploy("a", "scaled", 2, "web:1"),
            hpa("a", "scaled"),
            deploy("b", "scaled", 2, "web:1"),
            hpa("b", "scaled"),
            deploy("a", "plain", 2, "web:1"),
            deploy("a", "missing", 1, "web:1"),
            cm("a", "same", "prod"),
            cm("a", "changed", "prod"),
            cm("c", "unread", "prod"),
            sops.clone(),
        ];
        let live = vec![
            deploy("a", "scaled", 7, "web:2"),
            hpa("a", "scaled"),
            deploy("b", "scaled", 7, "web:1"),
            hpa("b", "scaled"),
            deploy("a", "plain", 5, "web:1"),
            cm("a", "same", "prod"),
            cm("a", "changed", "debug"),
            cm("a", "not-in-git", "x"),
            cm("c", "unread", "debug"),
            obj(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "a"},
                "data": {"k": "eA=="}})),
        ];
        let engine = || Engine::new(&EngineConfig::default()).unwrap();
        let options = ScanOptions { clock: || DateTime::<Utc>::UNIX_EPOCH, ..ScanOptions::new("s") };
        let scan = |whole_read: bool, whole_parts: bool| {
            let desired = drift_model::memory::MemoryDesiredSource::new("r", desired.clone());
            let inner = drift_model::memory::MemoryLiveSource::new("c", live.clone());
            inner.fail(GroupKind::new("", "ConfigMap"), Some("c"), CoverageStatus::Failed { message: "503".into() });
            // The autoscaler of `b` cannot be read: its target's replicas are compared.
            inner.fail(
                GroupKind::new("autoscaling", "HorizontalPodAutoscaler"),
                Some("b"),
                CoverageStatus::Forbidden { message: "403".into() },
            );
            let live = Parts { inner, whole: whole_parts };
            let options = options.clone();
            async move {
                if whole_read {
                    run_scan(&desired, &live, &Whole(engine()), &options).await
                } else {
                    run_scan(&desired, &live, &engine(), &options).await
                }
            }
        };
        let before = ready(scan(true, true));
        let found: Vec<(String, String)> = before
            .drifts
            .iter()
            .map(|d| {
                (
                    format!("{}/{}", d.resource.namespace.clone().unwrap_or_default(), d.resource.name),
                    d.path.to_string(),
                )
            })
            .collect();
        assert!(found.contains(&("b/scaled".into(), "spec.replicas".into())), "{found:?}");
        assert!(!found.contains(&("a/scaled".into(), "spec.replicas".into())), "the autoscaler's: {found:?}");
        assert!(
            found.iter().any(|(o, _)| o == "a/missing") && found.iter().any(|(o, _)| o == "a/changed"),
            "{found:?}"
        );
        assert!(!found.iter().any(|(o, _)| o == "c/unread" || o == "a/s"), "{found:?}");
        for (whole_parts, what) in [(true, "one part"), (false, "one part per pair")] {
            let after = ready(scan(false, whole_parts));
            assert_eq!(after, before, "compared as read ({what})");
        }
    }

    #[test]
    fn policies_check_desired_objects_and_their_live_counterparts_read_completely() {
        use crate::policy::{Policy, Rule, Side};
        let engine = Engine::new(&EngineConfig::default()).unwrap();
        let deploy = |ns: &str, image: &str| {
            Resource::from_object(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": ns},
                "spec": {"template": {"spec": {"securityContext": {"runAsNonRoot": true}, "containers": [{
                    "name": "web", "image": image,
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}}}}))
            .unwrap()
        };
        let desired = || DesiredSnapshot {
            repository: "r".into(),
            revision: None,
            resources: vec![deploy("a", "web:1.0"), deploy("b", "web:latest")],
            warnings: Vec::new(),
        };
        let gk = GroupKind::new("apps", "Deployment");
        let mut live = LiveSnapshot {
            cluster: "c".into(),
            resources: vec![deploy("a", "web"), deploy("b", "web"), deploy("c", "web")],
            coverage: Default::default(),
        };
        live.coverage.set(&gk, Some("a"), CoverageStatus::Complete);
        live.coverage.set(&gk, Some("b"), CoverageStatus::Failed { message: "503".into() });
        live.coverage.set(&gk, Some("c"), CoverageStatus::Complete);
        let mut options = ScanOptions::new("s");
        let off = compare_snapshots(desired(), live.clone(), &engine, &options);
        assert!(off.findings.is_empty() && off.policy_sides.is_empty(), "off unless asked for");
        options.policy = Some(std::sync::Arc::new(Policy::default()));
        let on = compare_snapshots(desired(), live, &engine, &options);
        let found: Vec<_> =
            on.findings.iter().map(|f| (f.resource.namespace.as_deref().unwrap(), f.side, f.rule)).collect();
        assert_eq!(
            found,
            [("a", Side::Live, Rule::ImageTag), ("b", Side::Desired, Rule::ImageTag)],
            "Git's objects, and only the live objects Git declares whose pair was read"
        );
        assert_eq!(on.summary.drifts, on.drifts.len(), "findings are not drifts");
        assert!(on.may_resolve_finding(&deploy("a", "x").key, Side::Desired));
        assert!(!on.may_resolve_finding(&deploy("b", "x").key, Side::Live), "b was not read");
        let one = targeted_report(
            &[],
            &deploy("a", "web:1.0"),
            Some(&deploy("a", "web:latest")),
            &engine,
            "c",
            "r",
            None,
            &options,
        );
        assert_eq!(one.findings.len(), 1, "the watch re-checks its object");
        assert_eq!((one.findings[0].side, one.findings[0].rule), (Side::Live, Rule::ImageTag));
        assert!(one.may_resolve_finding(&deploy("a", "x").key, Side::Desired));
        assert!(!one.may_resolve_finding(&deploy("b", "x").key, Side::Desired), "only its own object");
    }

    #[test]
    fn outcome_is_failed_only_when_nothing_could_be_compared() {
        let down = || CoverageStatus::Failed { message: "503".into() };
        assert_eq!(scan_with(&[("a", CoverageStatus::Complete)]).outcome, ScanOutcome::Success);
        assert_eq!(scan_with(&[("a", CoverageStatus::Complete), ("b", down())]).outcome, ScanOutcome::Partial);
        let failed = scan_with(&[("a", down()), ("b", down())]);
        assert_eq!(failed.outcome, ScanOutcome::Failed);
        assert!(!failed.may_resolve(&cm("a").key), "a failed scan resolves nothing");
        assert_eq!(scan_with(&[]).outcome, ScanOutcome::Success, "an empty repository is not a failure");
    }
}
