//! Desired objects kept compact until each is compared ([`KeptResource`]; the module
//! documentation of [`drift_model::desired`] says why).

use std::borrow::Cow;
use std::collections::HashSet;

use drift_model::compare::Comparator;
use drift_model::desired::{DesiredObject, Relations};
use drift_model::drift::Drift;
use drift_model::tree::{JsonView, ObjectRef, ObjectTree, Shape};
use drift_model::{Provenance, Resource, ResourceKey};

/// A desired object kept compact, with its digest, its SOPS mark and whether it carries waivers
/// worked out when it was read (see the module documentation): its tree written as bytes that
/// read back with nothing to scan (a tag and a length or 8 bytes a value, the strings as they
/// are), LZ4-compressed, which for a manifest is about two fifths of its compact JSON; expanding
/// one costs microseconds.
///
/// [`KeptResource::new`] and [`KeptResource::asking`] make the digest a report carries
/// ([`drift_model::object_digest`], a SHA-256 of the compact JSON); [`KeptResource::comparing`],
/// for a front end whose reports are never stored nor checked (`drift diff`), keeps a
/// fingerprint of the object instead, which tells an object read again from its file apart from
/// the one held ([`DesiredObject::same_as`]) at a fraction of the cost, and is what
/// [`DesiredObject::digest`] answers then.
///
/// ```
/// use drift_manifest::KeptResource;
/// use drift_model::DesiredObject;
/// let r = drift_model::Resource::from_object(serde_json::json!({"apiVersion": "v1",
///     "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "shop"}, "data": {"a": "1"}}))
///     .unwrap();
/// let kept = KeptResource::new(&r);
/// assert_eq!(kept.digest(), drift_model::object_digest(&r.object));
/// assert_eq!(kept.into_tree(), r);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct KeptResource {
    key: ResourceKey,
    api_version: String,
    provenance: Provenance,
    /// The object's bytes (`value_bytes`), LZ4 block with its length first; `None` once let go.
    packed: Option<Box<[u8]>>,
    /// The digest reported ([`KeptResource::new`]), or the fingerprint ([`KeptResource::comparing`]).
    identity: Identity,
    encrypted: bool,
    waived: bool,
    /// [`Comparator::relations`] of this object alone, once asked, while its key is unchanged.
    related: Option<HashSet<ResourceKey>>,
}

/// What a kept object says it is: the digest a report carries, or (for comparing only) a
/// fingerprint of its bytes.
#[derive(Debug, Clone, PartialEq)]
enum Identity {
    Digest(String),
    Fingerprint(u64),
}

impl Identity {
    /// The identity of `r`, whose bytes' fingerprint is `fingerprint` (when one was made): its
    /// SOPS digest when it was opened from SOPS (that of its encrypted document, whichever way it
    /// is kept).
    fn of(r: &Resource, fingerprint: Option<u64>) -> Self {
        match (&r.provenance.sops_digest, fingerprint) {
            (Some(d), _) => Identity::Digest(d.clone()),
            (None, Some(f)) => Identity::Fingerprint(f),
            (None, None) => Identity::Digest(drift_model::object_digest(&r.object)),
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Identity::Digest(d) => d.len(),
            Identity::Fingerprint(_) => 0,
        }
    }

    fn text(&self) -> String {
        match self {
            Identity::Digest(d) => d.clone(),
            Identity::Fingerprint(f) => format!("{f:016x}"),
        }
    }
}

/// A 64-bit fingerprint of an object's bytes (SipHash with fixed keys: the same tree gives the
/// same fingerprint in every run), to tell whether an object read again changed.
fn fingerprint(bytes: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = std::hash::DefaultHasher::new();
    h.write(bytes);
    h.finish()
}

/// `with` a buffer of the thread's that is kept from one object to the next, with the bytes the
/// last use left in it (one grown past 1 MiB for a large object is emptied and shrunk first), or
/// a new one when the thread's is in use.
fn with_scratch<R>(
    buffer: &'static std::thread::LocalKey<std::cell::RefCell<Vec<u8>>>,
    with: impl FnOnce(&mut Vec<u8>) -> R,
) -> R {
    buffer.with(|b| match b.try_borrow_mut() {
        Ok(mut bytes) => {
            if bytes.capacity() > 1 << 20 {
                bytes.clear();
                bytes.shrink_to(64 << 10);
            }
            with(&mut bytes)
        }
        // (Not reached: no caller makes or expands another object within `with`.)
        Err(_) => with(&mut Vec::new()),
    })
}

thread_local! {
    /// An object's bytes, as written to be kept.
    static BYTES: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Their LZ4 block, as written before it is copied out at its size.
    static BLOCK: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// `with` the bytes of an object ([`crate::value_bytes`]).
fn with_bytes<'a, R>(object: impl JsonView<'a>, with: impl FnOnce(&[u8]) -> R) -> R {
    with_scratch(&BYTES, |bytes| {
        bytes.clear();
        crate::value_bytes::write(object, bytes);
        with(bytes)
    })
}

/// An LZ4 block of `bytes`, its length first as a little-endian `u32` (the layout of
/// `lz4_flex::block::compress_prepend_size`, which `unpack` reads), compressed into a buffer of
/// the thread's and copied out at its size: no block of the largest size zeroed and then shrunk
/// for each object.
fn pack(bytes: &[u8]) -> Box<[u8]> {
    let Ok(len) = u32::try_from(bytes.len()) else {
        // (Not reached: a document is bounded far below 4 GiB. The crate's own call refuses
        // nothing either.)
        return lz4_flex::block::compress_prepend_size(bytes).into_boxed_slice();
    };
    // (Resized, not cleared: only room the buffer did not have is zeroed.)
    with_scratch(&BLOCK, |block| {
        block.resize(4 + lz4_flex::block::get_maximum_output_size(bytes.len()), 0);
        block[..4].copy_from_slice(&len.to_le_bytes());
        match lz4_flex::block::compress_into(bytes, &mut block[4..]) {
            Ok(n) => Box::from(&block[..4 + n]),
            // (Not reached: the block has the room the crate says the worst case needs.)
            Err(_) => lz4_flex::block::compress_prepend_size(bytes).into_boxed_slice(),
        }
    })
}

/// `with` the bytes of a block `pack` made, decompressed into a buffer of the thread's; `None`
/// when the block does not decompress to the length written before it.
fn unpack<R>(packed: &[u8], with: impl FnOnce(&[u8]) -> R) -> Option<R> {
    let (len, block) = lz4_flex::block::uncompressed_size(packed).ok()?;
    with_scratch(&BYTES, |bytes| {
        bytes.resize(len, 0);
        let n = lz4_flex::block::decompress_into(block, bytes).ok()?;
        (n == len).then(|| with(bytes))
    })
}

impl KeptResource {
    /// Keeps `r` compact, with its digest.
    pub fn new(r: &Resource) -> Self {
        KeptResource::keep(r, true)
    }

    fn keep(r: &Resource, digest: bool) -> Self {
        let (packed, fingerprint) =
            with_bytes(&*r.object, |bytes| (pack(bytes), (!digest).then(|| fingerprint(bytes))));
        let identity = Identity::of(r, fingerprint);
        KeptResource {
            key: r.key.clone(),
            api_version: r.api_version.clone(),
            provenance: r.provenance.clone(),
            packed: Some(packed),
            identity,
            encrypted: drift_model::secret::is_sops_encrypted(&r.object),
            waived: r.waived(),
            related: None,
        }
    }

    /// [`KeptResource::new`], with `comparator`'s relations of the object alone asked while its
    /// tree is in hand (what [`DesiredObject::relations`] would otherwise expand it for).
    pub fn asking(r: &Resource, comparator: &dyn Comparator) -> Self {
        let mut kept = KeptResource::new(r);
        kept.related = comparator.relations(std::slice::from_ref(r));
        kept
    }

    /// [`KeptResource::asking`] for a scan whose report only shows drifts (`drift diff`): no
    /// digest is made (a SHA-256 of each object, the largest single cost of keeping it), a
    /// fingerprint is kept instead (see the type's documentation). The report's
    /// `desired_digests` then hold fingerprints, which are not digests: such a report is not for
    /// storing nor for checking an apply ([`drift_engine::check`](https://docs.rs/drift-engine)).
    ///
    /// ```
    /// use drift_manifest::KeptResource;
    /// use drift_model::{DesiredObject, Resource, compare::Comparator, drift::Drift};
    /// #[derive(Debug)]
    /// struct Nothing;
    /// impl Comparator for Nothing {
    ///     fn compare(&self, _: &Resource, _: Option<&Resource>) -> Vec<Drift> { Vec::new() }
    /// }
    /// let mut r = Resource::from_object(serde_json::json!({"apiVersion": "v1",
    ///     "kind": "ConfigMap", "metadata": {"name": "web"}, "data": {"a": "1"}})).unwrap();
    /// let kept = KeptResource::comparing(&r, &Nothing);
    /// assert_eq!(kept.tree().as_ref(), &r);
    /// assert!(kept.same_as(&r));
    /// std::sync::Arc::make_mut(&mut r.object)["data"]["a"] = "2".into();
    /// assert!(!kept.same_as(&r), "read again changed");
    /// ```
    pub fn comparing(r: &Resource, comparator: &dyn Comparator) -> Self {
        let mut kept = KeptResource::keep(r, false);
        kept.related = comparator.relations(std::slice::from_ref(r));
        kept
    }

    /// [`KeptResource::comparing`] of an object read as a tree ([`ObjectTree`]): the same kept
    /// object, made without a `Value` (its relations asked through
    /// [`Comparator::relations_tree`]). An object opened from SOPS is kept from its `Resource`.
    pub fn comparing_tree(t: &ObjectTree<'_>, comparator: &dyn Comparator) -> Self {
        let root = t.tree.root();
        let (packed, fingerprint) = with_bytes(root, |bytes| (pack(bytes), fingerprint(bytes)));
        let desired = ObjectRef { key: &t.key, api_version: &t.api_version, provenance: &t.provenance, tree: &t.tree };
        let sops = root.get("sops").filter(|m| m.shape() == Shape::Object);
        let annotations = root.get("metadata").and_then(|m| m.get("annotations"));
        KeptResource {
            key: t.key.clone(),
            api_version: t.api_version.clone(),
            provenance: t.provenance.clone(),
            packed: Some(packed),
            identity: match &t.provenance.sops_digest {
                Some(d) => Identity::Digest(d.clone()),
                None => Identity::Fingerprint(fingerprint),
            },
            encrypted: sops.is_some_and(|m| m.get("mac").is_some() || m.get("lastmodified").is_some()),
            waived: annotations.and_then(|a| a.get(drift_model::waiver::WAIVERS_ANNOTATION)).is_some(),
            related: comparator.relations_tree(desired),
        }
    }

    /// The resource back, with a tree of its own (`null` once let go: the scan asks for the
    /// tree only of objects it holds, [`DesiredObject::held`]).
    fn expand(&self) -> Resource {
        debug_assert!(self.packed.is_some(), "{}: the tree of an object let go of was asked for", self.key);
        // The block and its bytes were written by `pack` and `value_bytes`: they read back.
        let object = self.packed.as_deref().and_then(|p| unpack(p, crate::value_bytes::read)).flatten();
        debug_assert!(object.is_some() || self.packed.is_none(), "{}: its kept bytes did not read back", self.key);
        Resource {
            key: self.key.clone(),
            api_version: self.api_version.clone(),
            object: std::sync::Arc::new(object.unwrap_or(serde_json::Value::Null)),
            provenance: self.provenance.clone(),
        }
    }

    /// Bytes held on the heap: the compressed object, the key, apiVersion and digest (the
    /// provenance's paths and rules are not counted).
    pub fn heap_bytes(&self) -> usize {
        self.packed.as_ref().map_or(0, |p| p.len())
            + self.api_version.len()
            + self.key.heap_bytes()
            + self.identity.heap_bytes()
    }
}

impl DesiredObject for KeptResource {
    fn key(&self) -> &ResourceKey {
        &self.key
    }

    fn key_mut(&mut self) -> &mut ResourceKey {
        // The comparator's answer was for the key it saw.
        self.related = None;
        &mut self.key
    }

    fn provenance(&self) -> &Provenance {
        &self.provenance
    }

    fn tree(&self) -> Cow<'_, Resource> {
        Cow::Owned(self.expand())
    }

    /// Expanded into a tree that borrows the unpacked bytes, compared, and dropped: no `Value`
    /// is made of it.
    fn compare_live(&self, comparator: &dyn Comparator, live: &ObjectTree<'_>) -> Vec<Drift> {
        debug_assert!(self.packed.is_some(), "{}: an object let go of was compared", self.key);
        let compared = self.packed.as_deref().and_then(|p| {
            unpack(p, |bytes| {
                let tree = crate::value_bytes::read_tree(bytes)?;
                let desired = ObjectRef {
                    key: &self.key,
                    api_version: &self.api_version,
                    provenance: &self.provenance,
                    tree: &tree,
                };
                Some(comparator.compare_trees(desired, live))
            })
            .flatten()
        });
        // (The block and its bytes were written by `pack` and `value_bytes`: they read back.)
        compared.unwrap_or_else(|| comparator.compare_tree(&self.expand(), live))
    }

    fn into_tree(self) -> Resource {
        self.expand()
    }

    fn encrypted(&self) -> bool {
        self.encrypted
    }

    fn digest(&self) -> String {
        self.identity.text()
    }

    fn same_as(&self, again: &Resource) -> bool {
        match &self.identity {
            Identity::Digest(d) => again.digest() == *d,
            Identity::Fingerprint(f) => {
                again.provenance.sops_digest.is_none() && with_bytes(&*again.object, |bytes| fingerprint(bytes) == *f)
            }
        }
    }

    fn waived(&self) -> bool {
        self.waived
    }

    fn let_go(&mut self) {
        self.packed = None;
    }

    fn held(&self) -> bool {
        self.packed.is_some()
    }

    fn restore(&mut self, again: &Resource) {
        self.packed = Some(with_bytes(&*again.object, pack));
    }

    fn trees<'a>(all: &'a [Self], keep: &dyn Fn(&ResourceKey) -> bool) -> Cow<'a, [Resource]> {
        Cow::Owned(all.iter().filter(|r| keep(r.key())).map(KeptResource::expand).collect())
    }

    fn relations(all: &mut [Self], comparator: &dyn Comparator) -> Option<Relations> {
        if all.is_empty() {
            return Some(Relations { related: comparator.relations(&[])?, holders: HashSet::new() });
        }
        let mut found = Relations::default();
        for r in all {
            if r.related.is_none() {
                r.related = Some(comparator.relations(std::slice::from_ref(&r.expand()))?);
            }
            if let Some(own) = r.related.as_ref().filter(|own| !own.is_empty()) {
                found.holders.insert(r.key.clone());
                found.related.extend(own.iter().cloned());
            }
        }
        Some(found)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// A comparator whose relations depend on the object's kind and fields.
    #[derive(Debug)]
    struct Related;

    impl Comparator for Related {
        fn compare(&self, _: &Resource, _: Option<&Resource>) -> Vec<Drift> {
            Vec::new()
        }

        fn relations(&self, desired: &[Resource]) -> Option<HashSet<ResourceKey>> {
            let r = desired.first()?;
            (r.key.kind != "None").then(|| {
                r.object
                    .get("related")
                    .and_then(|v| v.as_str())
                    .map(|n| ResourceKey::new("", "ConfigMap", None, n))
                    .into_iter()
                    .collect()
            })
        }
    }

    proptest! {
        /// An object kept from its tree is the object kept from its `Resource`: the same bytes,
        /// fingerprint, flags and relations.
        #[test]
        fn an_object_kept_from_its_tree_is_the_one_kept_from_its_resource(
            body in crate::json_tree::tests::value(),
            kind in prop::sample::select(vec!["ConfigMap", "None", "Secret"]),
            sops in prop::option::of(prop::sample::select(vec![json!({"mac": "x"}), json!({"lastmodified": null}), json!({"other": 1}), json!("s")])),
            waived in any::<bool>(),
            sops_digest in prop::option::of(Just("sha256:abc".to_owned())),
        ) {
            let mut object = json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": "web"}, "body": body, "related": "other"});
            if let Some(s) = sops {
                object["sops"] = s;
            }
            if waived {
                object["metadata"]["annotations"] = json!({drift_model::waiver::WAIVERS_ANNOTATION: "[]"});
            }
            let provenance = Provenance { path: Some("a.yaml".into()), document: Some(0), sops_digest, ..Provenance::default() };
            let r = resource(object.clone()).with_provenance(provenance.clone());
            let t = ObjectTree::new(drift_model::tree::Tree::from_value(&object), provenance).unwrap();
            prop_assert_eq!(KeptResource::comparing_tree(&t, &Related), KeptResource::comparing(&r, &Related));
        }
    }

    fn resource(object: serde_json::Value) -> Resource {
        Resource::from_object(object).unwrap()
    }

    #[test]
    fn a_kept_object_answers_as_its_tree_does() {
        let plain = resource(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "w", "namespace": "n", "annotations": {"drift-detector.io/waivers": "[]"}},
            "spec": {"replicas": 3, "ratio": 0.1, "big": 18446744073709551615u64}}));
        let mut opened = resource(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "stringData": {"a": "ENC[AES256_GCM,data:x,iv:y,tag:z,type:str]"}, "sops": {"mac": "m", "version": "3.9"}}));
        opened.provenance.sops_digest = Some("cafe".into());
        for r in [plain, opened] {
            let kept = KeptResource::new(&r);
            assert_eq!(kept.key(), r.key());
            assert_eq!(kept.provenance(), r.provenance());
            assert_eq!(kept.digest(), r.digest());
            assert_eq!(kept.encrypted(), r.encrypted());
            assert_eq!(kept.waived(), r.waived());
            assert_eq!(kept.tree().as_ref(), &r);
            assert!(kept.heap_bytes() > 0);
        }
    }

    /// Names, for each object, the ConfigMap `t` in its namespace, and counts the questions.
    #[derive(Debug, Default)]
    struct Counting(std::sync::atomic::AtomicUsize);

    impl Comparator for Counting {
        fn compare(&self, _: &Resource, _: Option<&Resource>) -> Vec<drift_model::drift::Drift> {
            Vec::new()
        }

        fn relations(&self, desired: &[Resource]) -> Option<HashSet<ResourceKey>> {
            self.0.fetch_add(desired.len(), std::sync::atomic::Ordering::Relaxed);
            Some(desired.iter().map(|r| ResourceKey::new("", "ConfigMap", r.key.namespace.as_deref(), "t")).collect())
        }
    }

    #[test]
    fn a_kept_object_asks_the_comparator_again_only_when_its_key_changed() {
        let mut kept: Vec<KeptResource> = ["a", "b"]
            .iter()
            .map(|n| {
                KeptResource::new(&resource(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n}})))
            })
            .collect();
        let counting = Counting::default();
        let asked = || counting.0.load(std::sync::atomic::Ordering::Relaxed);
        let first = KeptResource::relations(&mut kept, &counting).unwrap();
        assert_eq!(first.related, HashSet::from([ResourceKey::new("", "ConfigMap", None, "t")]));
        assert_eq!(first.holders.len(), 2);
        assert_eq!(KeptResource::relations(&mut kept, &counting).unwrap(), first);
        assert_eq!(asked(), 2, "each object asked once");
        kept[1].key_mut().namespace = Some("shop".into());
        let again = KeptResource::relations(&mut kept, &counting).unwrap();
        assert_eq!(asked(), 3, "only the object whose key changed asked again");
        assert!(again.related.contains(&ResourceKey::new("", "ConfigMap", Some("shop"), "t")));
    }

    #[test]
    fn a_kept_object_asked_when_made_is_not_asked_again_until_its_key_changes() {
        let r = resource(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}));
        let counting = Counting::default();
        let mut kept = vec![KeptResource::asking(&r, &counting)];
        let asked = || counting.0.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(asked(), 1);
        let found = KeptResource::relations(&mut kept, &counting).unwrap();
        assert_eq!(found.related, HashSet::from([ResourceKey::new("", "ConfigMap", None, "t")]));
        assert_eq!(asked(), 1, "the answer given when it was made");
        kept[0].key_mut().namespace = Some("shop".into());
        KeptResource::relations(&mut kept, &counting).unwrap();
        assert_eq!(asked(), 2);
    }

    #[test]
    fn trees_of_kept_objects_are_the_ones_asked_for_and_trees_are_lent_whole() {
        let rs: Vec<Resource> = ["a", "b", "c"]
            .iter()
            .map(|n| resource(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n}})))
            .collect();
        let kept: Vec<KeptResource> = rs.iter().map(KeptResource::new).collect();
        let keep = |k: &ResourceKey| k.name != "b";
        let names = |t: &[Resource]| t.iter().map(|r| r.key.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&KeptResource::trees(&kept, &keep)), ["a", "c"]);
        assert_eq!(names(&Resource::trees(&rs, &keep)), ["a", "b", "c"]);
    }
}
