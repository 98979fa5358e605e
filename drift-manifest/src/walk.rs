//! The one folder walker for manifest folders read from the local disk: the folders of
//! `drift diff --desired DIR --live DIR` (drift-bin) and of a `live.snapshot` source
//! (`drift_kube::SnapshotSource`, used by `scan` and `serve`). It is the one module of this
//! crate that touches the file system (`std::fs` only: listing folders, reading link targets
//! and sizes; the files are read by the caller).
//!
//! The rules are those of the Git source's render (which never follows a symbolic link):
//!
//! - entries whose name starts with `.` are skipped, as are files whose name does not end in
//!   `.yaml`, `.yml` or `.json`; the entries of a folder are visited in path order;
//! - a symbolic link is followed only when its target, resolved with
//!   [`std::fs::canonicalize`], lies inside the root; a link to a folder is never followed into
//!   a folder that is already being walked (one of its own parents: no cycles);
//! - only regular files are read: a FIFO, socket or device named like a manifest is skipped;
//! - at most [`MAX_FILES`] files, [`MAX_DIRS`] folders and [`MAX_BYTES`] bytes in total.
//!
//! Each entry refused on purpose (a link leaving the root, a link into a folder being walked, a
//! file that is not a regular file) is a note ([`SourceWarning::note`]) naming its path: it is
//! skipped and the rest is read. Reaching a bound is an error ([`SourceWarning::error`], fatal):
//! the walk stops there, as the folder was not read completely. A link whose target does not
//! exist is reported, as before, as a file that cannot be read.

use std::io;
use std::path::{Path, PathBuf};

use drift_model::{ErrorKind, SourceWarning};

/// The most manifest files one walk returns: twice the 100,000 objects the detector is sized
/// for, written one object per file.
pub const MAX_FILES: usize = 200_000;

/// The most folders one walk enters (each folder reached through a link counts again).
pub const MAX_DIRS: usize = 200_000;

/// The most bytes the files of one walk may hold together: 2 GiB.
pub const MAX_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// The bounds of a walk. [`WalkLimits::default`] is [`MAX_FILES`], [`MAX_DIRS`] and
/// [`MAX_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkLimits {
    /// The most files returned.
    pub max_files: usize,
    /// The most folders entered, the root included.
    pub max_dirs: usize,
    /// The most bytes of the returned files together.
    pub max_bytes: u64,
}

impl Default for WalkLimits {
    fn default() -> Self {
        WalkLimits { max_files: MAX_FILES, max_dirs: MAX_DIRS, max_bytes: MAX_BYTES }
    }
}

/// What a walk found: the files to read, in order, and a warning for each entry not read.
#[derive(Debug, Default)]
pub struct Walked {
    /// The manifest files to read, as paths below the root as it was given (a file reached
    /// through a link keeps the link's path).
    pub files: Vec<PathBuf>,
    /// One warning per entry refused (notes) and for a bound reached (an error), with its path.
    pub warnings: Vec<SourceWarning>,
}

/// A folder (or the root) that could not be listed.
#[derive(Debug)]
pub struct WalkError {
    /// The path as it was reached.
    pub path: PathBuf,
    /// Why.
    pub source: io::Error,
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.source)
    }
}

impl std::error::Error for WalkError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Whether the name ends in `.yaml`, `.yml` or `.json`.
pub fn is_manifest(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
}

/// Walks `root` (a file or a folder) with the default bounds. See the module documentation for
/// the rules. An error means the root, or a folder below it, could not be listed.
pub fn walk(root: &Path) -> Result<Walked, WalkError> {
    walk_with(root, WalkLimits::default())
}

/// Walks `root` with the given bounds.
pub fn walk_with(root: &Path, limits: WalkLimits) -> Result<Walked, WalkError> {
    let err = |source| WalkError { path: root.to_owned(), source };
    let meta = std::fs::metadata(root).map_err(err)?;
    let mut walker = Walker { limits, out: Walked::default(), bytes: 0, dirs: 0, root_canon: PathBuf::new() };
    if meta.is_file() {
        // A file named on the command line is read whatever its name, as before.
        walker.add_file(root, meta.len());
        return Ok(walker.out);
    }
    if !meta.is_dir() {
        return Err(err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file nor a folder")));
    }
    walker.root_canon = std::fs::canonicalize(root).map_err(err)?;
    let mut parents = vec![walker.root_canon.clone()];
    walker.dir(root, &mut parents)?;
    Ok(walker.out)
}

struct Walker {
    limits: WalkLimits,
    out: Walked,
    bytes: u64,
    dirs: usize,
    root_canon: PathBuf,
}

/// Stop walking: a bound was reached (already reported).
struct Full;

impl Walker {
    fn note(&mut self, path: &Path, message: &str) {
        self.out.warnings.push(SourceWarning::note(message).at(path.display().to_string(), None, None));
    }

    fn full(&mut self, path: &Path, message: String) -> Full {
        self.out.warnings.push(SourceWarning::error(ErrorKind::InvalidInput, message).at(
            path.display().to_string(),
            None,
            None,
        ));
        Full
    }

    /// Adds a regular file, unless a bound is reached.
    fn add_file(&mut self, path: &Path, len: u64) -> Option<Full> {
        if self.out.files.len() >= self.limits.max_files {
            let max = self.limits.max_files;
            return Some(
                self.full(path, format!("more than {max} manifest files: the walk stopped here, the rest is not read")),
            );
        }
        if self.bytes.saturating_add(len) > self.limits.max_bytes {
            let max = self.limits.max_bytes;
            return Some(self.full(
                path,
                format!("more than {max} bytes of manifests: the walk stopped here, the rest is not read"),
            ));
        }
        self.bytes += len;
        self.out.files.push(path.to_owned());
        None
    }

    /// Walks the folder `dir` (shown path), whose resolved path is the last of `parents`.
    fn dir(&mut self, dir: &Path, parents: &mut Vec<PathBuf>) -> Result<Option<Full>, WalkError> {
        self.dirs += 1;
        if self.dirs > self.limits.max_dirs {
            let max = self.limits.max_dirs;
            return Ok(Some(
                self.full(dir, format!("more than {max} folders: the walk stopped here, the rest is not read")),
            ));
        }
        let err = |source| WalkError { path: dir.to_owned(), source };
        // The entries of one folder in path order: their names' bytes (the paths share the
        // folder, so this is `Path`'s order, without parsing each path into components).
        let mut entries: Vec<(std::ffi::OsString, std::fs::DirEntry)> = std::fs::read_dir(dir)
            .map_err(err)?
            .map(|e| e.map(|e| (e.file_name(), e)))
            .collect::<io::Result<_>>()
            .map_err(err)?;
        entries.sort_unstable_by(|(a, _), (b, _)| a.as_encoded_bytes().cmp(b.as_encoded_bytes()));
        for (name, e) in entries {
            if name.as_encoded_bytes().starts_with(b".") {
                continue;
            }
            if let Some(full) = self.entry(&e, parents)? {
                return Ok(Some(full));
            }
        }
        Ok(None)
    }

    fn entry(&mut self, e: &std::fs::DirEntry, parents: &mut Vec<PathBuf>) -> Result<Option<Full>, WalkError> {
        let p = &e.path();
        // (The entry's own metadata, a link not followed, asked of its folder: the name alone
        // is looked up, not the whole path again.)
        let Ok(own) = e.metadata() else {
            // Gone since the listing: read as before, so that the reader reports it.
            return Ok(if is_manifest(p) { self.add_file(p, 0) } else { None });
        };
        let (meta, resolved) = if own.file_type().is_symlink() {
            let resolved = match std::fs::canonicalize(p) {
                Ok(r) => r,
                // A dangling link: left to the reader, which says it cannot be read (as before).
                Err(_) => return Ok(if is_manifest(p) { self.add_file(p, 0) } else { None }),
            };
            if !resolved.starts_with(&self.root_canon) {
                if resolved.is_dir() || is_manifest(p) {
                    self.note(p, "symbolic link not followed: its target is outside the folder");
                }
                return Ok(None);
            }
            match std::fs::metadata(&resolved) {
                Ok(m) => (m, resolved),
                Err(_) => return Ok(if is_manifest(p) { self.add_file(p, 0) } else { None }),
            }
        } else {
            let resolved = match (parents.last(), p.file_name()) {
                (Some(parent), Some(name)) => parent.join(name),
                _ => p.to_owned(),
            };
            (own, resolved)
        };
        if meta.is_dir() {
            if parents.contains(&resolved) {
                self.note(p, "symbolic link not followed: it leads back into a folder being walked (a cycle)");
                return Ok(None);
            }
            parents.push(resolved);
            let result = self.dir(p, parents);
            parents.pop();
            return result;
        }
        if !is_manifest(p) {
            return Ok(None);
        }
        if meta.is_file() {
            return Ok(self.add_file(p, meta.len()));
        }
        self.note(p, "not a regular file (a FIFO, socket or device): not read");
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::symlink;

    fn write(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn names(w: &Walked, root: &Path) -> Vec<String> {
        w.files.iter().map(|f| f.strip_prefix(root).unwrap().display().to_string()).collect()
    }

    #[test]
    fn a_plain_folder_is_listed_in_order_without_hidden_entries_and_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(&root.join("b/c.yaml"), "");
        write(&root.join("a.json"), "");
        write(&root.join("b/a.yml"), "");
        write(&root.join("README.md"), "");
        write(&root.join(".hidden/x.yaml"), "");
        write(&root.join(".x.yaml"), "");
        let w = walk(root).unwrap();
        assert_eq!(names(&w, root), ["a.json", "b/a.yml", "b/c.yaml"]);
        assert!(w.warnings.is_empty(), "{:?}", w.warnings);
    }

    #[test]
    fn a_name_starting_with_a_dot_is_skipped_whatever_its_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(&root.join("a.yaml"), "");
        write(&root.join(std::ffi::OsStr::from_bytes(b".\xff.yaml")), "");
        write(&root.join(std::ffi::OsStr::from_bytes(b"\xff.yaml")), "");
        let w = walk(root).unwrap();
        let names: Vec<&[u8]> = w.files.iter().map(|f| f.strip_prefix(root).unwrap().as_os_str().as_bytes()).collect();
        assert_eq!(names, [&b"a.yaml"[..], b"\xff.yaml"]);
    }

    #[test]
    fn two_links_up_end_with_notes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(&root.join("a/x.yaml"), "");
        write(&root.join("b/y.yaml"), "");
        symlink("..", root.join("a/up")).unwrap();
        symlink("..", root.join("b/up")).unwrap();
        let w = walk(root).unwrap();
        assert_eq!(names(&w, root), ["a/x.yaml", "b/y.yaml"]);
        let noted: Vec<_> = w.warnings.iter().map(|n| (n.path.clone().unwrap(), n.fatal)).collect();
        let shown = |s: &str| root.join(s).display().to_string();
        assert_eq!(noted, [(shown("a/up"), false), (shown("b/up"), false)]);
        assert!(w.warnings.iter().all(|n| n.message.contains("a cycle")));
    }

    #[test]
    fn links_inside_are_followed_and_links_outside_are_not() {
        let outside = tempfile::tempdir().unwrap();
        write(&outside.path().join("secret.yaml"), "kind: Secret\n");
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(&root.join("real/a.yaml"), "");
        symlink(root.join("real"), root.join("same")).unwrap();
        symlink("real/a.yaml", root.join("b.yaml")).unwrap();
        symlink(outside.path().join("secret.yaml"), root.join("out.yaml")).unwrap();
        symlink(outside.path(), root.join("outdir")).unwrap();
        let w = walk(root).unwrap();
        assert_eq!(names(&w, root), ["b.yaml", "real/a.yaml", "same/a.yaml"]);
        let noted: Vec<_> = w.warnings.iter().map(|n| n.path.clone().unwrap()).collect();
        assert_eq!(noted, [root.join("out.yaml").display().to_string(), root.join("outdir").display().to_string()]);
        assert!(w.warnings.iter().all(|n| !n.fatal && n.message.contains("outside the folder")));
    }

    #[test]
    fn a_fifo_is_skipped_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(&root.join("a.yaml"), "");
        let status = std::process::Command::new("mkfifo").arg(root.join("x.yaml")).status().unwrap();
        assert!(status.success());
        let w = walk(root).unwrap();
        assert_eq!(names(&w, root), ["a.yaml"]);
        assert_eq!(w.warnings.len(), 1);
        assert_eq!(w.warnings[0].path.as_deref(), Some(root.join("x.yaml").display().to_string().as_str()));
        assert!(w.warnings[0].message.contains("not a regular file"));
    }

    #[test]
    fn the_bounds_stop_the_walk_with_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for i in 0..5 {
            write(&root.join(format!("f{i}.yaml")), "0123456789");
        }
        let w = walk_with(root, WalkLimits { max_files: 3, ..WalkLimits::default() }).unwrap();
        assert_eq!(names(&w, root), ["f0.yaml", "f1.yaml", "f2.yaml"]);
        assert_eq!(w.warnings.len(), 1);
        assert!(w.warnings[0].fatal);
        assert!(w.warnings[0].message.contains("more than 3 manifest files"));
        assert_eq!(w.warnings[0].path.as_deref(), Some(root.join("f3.yaml").display().to_string().as_str()));

        let w = walk_with(root, WalkLimits { max_bytes: 25, ..WalkLimits::default() }).unwrap();
        assert_eq!(names(&w, root), ["f0.yaml", "f1.yaml"]);
        assert!(w.warnings[0].fatal && w.warnings[0].message.contains("more than 25 bytes"));

        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::create_dir(root.join("d/e")).unwrap();
        let w = walk_with(root, WalkLimits { max_dirs: 2, ..WalkLimits::default() }).unwrap();
        assert!(w.warnings[0].fatal && w.warnings[0].message.contains("more than 2 folders"));
        assert_eq!(w.warnings[0].path.as_deref(), Some(root.join("d/e").display().to_string().as_str()));
    }

    #[test]
    fn a_missing_root_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let e = walk(&dir.path().join("nope")).unwrap_err();
        assert!(e.to_string().starts_with(&dir.path().join("nope").display().to_string()));
    }
}
