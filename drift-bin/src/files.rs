//! Reading manifests from files and folders.

use std::path::{Path, PathBuf};

use anyhow::Result;
use drift_core::drift_model::tree::{JsonView, ObjectTree};
use drift_core::manifest::{
    Limits, ParsedManifests, parse_live_manifests_compared, parse_manifests_with, read_live_tree, read_manifest_tree,
};
use drift_core::progress::Progress;
use drift_core::scan::LiveObject;
use drift_core::sops::SopsOpener;
use drift_core::{Resource, SourceWarning};

/// Manifests read from a path: a YAML or JSON file, or a folder of them (recursively, sorted);
/// each object as a tree ([`Resource`]) or in the form `T` it is made into as soon as its file
/// is parsed ([`drift_core::KeptResource`]).
#[derive(Debug)]
pub struct Loaded<T = Resource> {
    pub resources: Vec<T>,
    pub warnings: Vec<SourceWarning>,
}

impl<T> Default for Loaded<T> {
    fn default() -> Self {
        Loaded { resources: Vec::new(), warnings: Vec::new() }
    }
}

/// What the loader makes of each object as soon as its file is parsed.
pub type Make<'a, T> = &'a (dyn Fn(Resource) -> T + Sync);

/// What the loader makes of the object of a file that holds one object alone, read as a tree
/// borrowing the file's text ([`read_manifest_tree`]), when it is given one: no `Value` is made
/// of such an object.
pub type MakeTree<'a, T> = &'a (dyn Fn(ObjectTree<'_>) -> T + Sync);

/// Which side a file is read for: live objects are kept without their `status`
/// ([`parse_live_manifests_compared`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Desired,
    Live,
}

/// The manifests of one file's text, SOPS-encrypted documents opened with `sops`.
fn parse_file(text: &str, shown: &str, side: Side, sops: Option<&dyn SopsOpener>) -> ParsedManifests {
    let mut parsed = match side {
        Side::Desired => parse_manifests_with(text, shown, Limits::live()),
        Side::Live => parse_live_manifests_compared(text, shown, Limits::live()),
    };
    if let Some(opener) = sops {
        drift_core::sops::open_file(&mut parsed, text, shown, opener);
    }
    parsed
}

fn load_files<T>(
    files: &[PathBuf],
    side: Side,
    progress: &Progress,
    sops: Option<&dyn SopsOpener>,
    make: Make<'_, T>,
    tree: Option<MakeTree<'_, T>>,
) -> Loaded<T> {
    let mut loaded = Loaded::default();
    for file in files {
        let shown = file.display().to_string();
        let read = with_text(file, |text| {
            // (A document with a `sops` field goes to the opener, as a `Resource`.)
            if let Some(make_tree) = tree
                && let Some(t) = read_manifest_tree(text, &shown, Limits::live())
                && t.tree.root().get("sops").is_none()
            {
                loaded.resources.push(make_tree(t));
                return;
            }
            let parsed = parse_file(text, &shown, side, sops);
            loaded.resources.extend(parsed.resources.into_iter().map(make));
            loaded.warnings.extend(parsed.warnings);
        });
        match read {
            Ok(()) => progress.files_read(1),
            Err(e) => loaded.warnings.push(unreadable(&shown, &e)),
        }
    }
    loaded
}

/// The warning of a file that cannot be read.
fn unreadable(shown: &str, e: &std::io::Error) -> SourceWarning {
    SourceWarning::error(drift_core::ErrorKind::InvalidInput, format!("cannot read: {e}")).at(
        shown.to_owned(),
        None,
        None,
    )
}

thread_local! {
    /// The buffer of [`with_text`].
    static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Calls `f` with the text of `file`, read into a buffer the thread keeps from file to file:
/// thousands of files cost neither an allocation each (most are larger than the allocator's
/// small sizes) nor the size query `std::fs::read_to_string` makes first, and a file that fits
/// the buffer is read by one call (and one more that finds its end). Errors as
/// `std::fs::read_to_string` gives them.
fn with_text(file: &Path, f: impl FnOnce(&str)) -> std::io::Result<()> {
    use std::io::Read;
    /// A buffer grown past this by a large file is let go of after it.
    const KEPT: usize = 1 << 20;
    BUFFER.with(|cell| {
        // (Taken out of the cell while in use: a reader that reads files again, as `reload`
        // does, gets a buffer of its own.) Its bytes stay written from file to file, so that
        // it is zeroed only where it grows; `len` counts this file's.
        let mut buf = cell.take();
        let result = (|| {
            let mut file = std::fs::File::open(file)?;
            let mut len = 0;
            loop {
                if len == buf.len() {
                    buf.resize((buf.len() * 2).max(64 << 10), 0);
                }
                match file.read(&mut buf[len..]) {
                    Ok(0) => break,
                    Ok(n) => len += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            let text = std::str::from_utf8(&buf[..len]).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, "stream did not contain valid UTF-8")
            })?;
            f(text);
            Ok(())
        })();
        if buf.len() <= KEPT {
            cell.replace(buf);
        }
        result
    })
}

/// The desired objects read again from the file and document a provenance names (what [`load`]
/// read there; the items of a `List` share their document), for `compare_files_streamed`; none
/// when the file cannot be read or no longer holds that document.
pub fn reload(provenance: &drift_core::Provenance, sops: Option<&dyn SopsOpener>) -> Vec<drift_core::Resource> {
    let Some(shown) = provenance.path.as_deref() else { return Vec::new() };
    let Ok(text) = std::fs::read_to_string(shown) else { return Vec::new() };
    let mut parsed = parse_file(&text, shown, Side::Desired, sops);
    parsed.resources.retain(|r| r.provenance.document == provenance.document);
    parsed.resources
}

/// The files under `path`, walked with the rules and bounds of [`drift_manifest::walk`]: each
/// entry refused (a link leaving the folder or into a folder being walked, a file that is not a
/// regular file) and a bound reached are warnings naming the path.
pub fn walk(path: &Path) -> Result<drift_manifest::walk::Walked> {
    drift_manifest::walk::walk(path).map_err(|e| {
        let what = if e.path == path && std::fs::metadata(path).is_err() { "read" } else { "list" };
        let shown = format!("cannot {what} {}", e.path.display());
        anyhow::Error::new(e.source).context(shown)
    })
}

/// Parsing dominates: the files are spread over the cores (at most 8), or over `DRIFT_THREADS`
/// threads when it is set to a number (1 reads and compares on one thread: the report is the
/// same, a test holds it so).
fn workers() -> usize {
    match std::env::var("DRIFT_THREADS").ok().and_then(|v| v.trim().parse::<usize>().ok()) {
        Some(n) => n.clamp(1, 64),
        None => std::thread::available_parallelism().map_or(1, |n| n.get()).min(8),
    }
}

/// Loads every manifest a [`walk`] found. A file that cannot be read as text is a
/// warning. Each file parsed is counted into `progress`. With `sops`, SOPS-encrypted files are
/// opened in memory ([`drift_core::sops::open_file`]); the desired side only. Each object is
/// made a `T` by `make` on the thread that parsed it.
pub fn load<T: Send>(
    walked: drift_manifest::walk::Walked,
    progress: &Progress,
    sops: Option<&dyn SopsOpener>,
    make: Make<'_, T>,
    tree: Option<MakeTree<'_, T>>,
) -> Loaded<T> {
    let files = walked.files;
    // Each worker takes the next file not yet taken, so that no core idles while another has
    // files left; the parts are put back in the files' order.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut parts: Vec<(usize, Loaded<T>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers())
            .map(|_| {
                let (files, next) = (&files, &next);
                s.spawn(move || {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(file) = files.get(i) else { break };
                        let part = load_files(std::slice::from_ref(file), Side::Desired, progress, sops, make, tree);
                        mine.push((i, part));
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    parts.sort_unstable_by_key(|(i, _)| *i);
    // (Sized at once: grown as they came, the objects would be copied over and again.)
    let count = parts.iter().map(|(_, part)| part.resources.len()).sum();
    let parts = parts.into_iter().map(|(_, part)| part);
    let mut loaded = Loaded { resources: Vec::with_capacity(count), warnings: walked.warnings };
    for part in parts {
        loaded.resources.extend(part.resources);
        loaded.warnings.extend(part.warnings);
    }
    loaded
}

/// Reads the walked files of live objects as [`load`] does (each without its `status`,
/// [`parse_live_manifests_compared`]), but hands each object to `sink` as soon as its file is parsed, on
/// the thread that parsed it (one per core), with its place in the files (the file's index in
/// the walk, then the document's: `file << 32 | document`), so that no more than a file's
/// objects per thread exist at once and whatever `sink` does (comparing the pair) runs on every
/// core. A file that holds one object in JSON is handed over as a tree borrowing the file's text
/// ([`read_live_tree`]: no `Value` made of it unless it is kept). Files arrive in any order.
/// Returns the warnings in the order [`load`] gives them.
pub fn stream(
    walked: drift_manifest::walk::Walked,
    progress: &Progress,
    sink: &drift_core::scan::LiveSink<'_>,
) -> Vec<SourceWarning> {
    let files = &walked.files;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut by_file: Vec<(usize, Vec<SourceWarning>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers())
            .map(|_| {
                let next = &next;
                s.spawn(move || {
                    let mut warnings = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(file) = files.get(i) else { break };
                        let shown = file.display().to_string();
                        let place = (i as u64) << 32;
                        let mut found = Vec::new();
                        let read = with_text(file, |text| {
                            // One object in JSON (what `kubectl get -o json` writes) is handed
                            // over as a tree that borrows the text; anything else, and every
                            // error, as `parse_live_manifests_compared` reads it.
                            if let Some(tree) = read_live_tree(text, &shown, Limits::live()) {
                                sink(place, LiveObject::Tree(tree));
                                return;
                            }
                            let parsed = parse_file(text, &shown, Side::Live, None);
                            for (j, r) in parsed.resources.into_iter().enumerate() {
                                sink(place | j as u64, r.into());
                            }
                            found = parsed.warnings;
                        });
                        match read {
                            Ok(()) => progress.files_read(1),
                            Err(e) => found.push(unreadable(&shown, &e)),
                        }
                        if !found.is_empty() {
                            warnings.push((i, found));
                        }
                    }
                    warnings
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    by_file.sort_by_key(|(i, _)| *i);
    let mut warnings = walked.warnings;
    warnings.extend(by_file.into_iter().flat_map(|(_, w)| w));
    warnings
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// What `with_text` gives `f`, or its error's text.
    fn read(file: &Path) -> Result<String, String> {
        let mut seen = None;
        with_text(file, |text| seen = Some(text.to_owned())).map_err(|e| e.to_string())?;
        Ok(seen.unwrap())
    }

    #[test]
    fn files_read_through_the_kept_buffer_read_as_read_to_string_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let large = "x".repeat(3 << 20);
        let medium = "y".repeat(200 << 10);
        let cases: [(&str, &[u8]); 8] = [
            ("a.yaml", b"kind: ConfigMap\n"),
            // Files read after a longer one in the same buffer: nothing of that one may show.
            ("empty.yaml", b""),
            ("medium.yaml", medium.as_bytes()),
            ("short.yaml", b"a: 1"),
            ("large.yaml", large.as_bytes()),
            ("after-large.yaml", b"b: 2"),
            ("bad.yaml", b"a: \xff\xfe\n"),
            ("after-bad.json", b"{}"),
        ];
        for (name, bytes) in cases {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            let expected = std::fs::read_to_string(&path).map_err(|e| e.to_string());
            assert_eq!(read(&path), expected, "{name}");
        }
        let missing = dir.path().join("missing.yaml");
        assert_eq!(read(&missing), std::fs::read_to_string(&missing).map_err(|e| e.to_string()));
        assert_eq!(read(dir.path()), std::fs::read_to_string(dir.path()).map_err(|e| e.to_string()));
        // A buffer grown by a large file is let go of; one of an ordinary file is kept.
        read(&dir.path().join("large.yaml")).unwrap();
        assert_eq!(BUFFER.with(|c| c.borrow().len()), 0);
        read(&dir.path().join("a.yaml")).unwrap();
        assert!(BUFFER.with(|c| c.borrow().len()) > 0);
    }
}
