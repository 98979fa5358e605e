//! One revision of a repository as a flat map of files, readable lazily and written to disk
//! only when an external renderer needs a real folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::SourceError;

/// A file of the tree: a content id (git blob id, or a SHA-256 of the content) and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileEntry {
    pub id: String,
    pub size: u64,
}

/// Reads file contents of a tree by repository-relative path.
pub(crate) trait BlobReader {
    fn read(&self, path: &str) -> Result<Vec<u8>, SourceError>;
}

/// The files of one revision.
pub(crate) struct Checkout<'a> {
    /// Repository-relative paths with `/` separators, sorted.
    pub files: BTreeMap<String, FileEntry>,
    reader: &'a dyn BlobReader,
    /// The tree already exists on disk here (folder source).
    on_disk: Option<PathBuf>,
    /// Where to write the tree when a renderer needs it (git and GitHub sources).
    materialize_dir: Option<PathBuf>,
    materialized: OnceLock<Result<PathBuf, String>>,
}

impl std::fmt::Debug for Checkout<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkout").field("files", &self.files.len()).field("on_disk", &self.on_disk).finish()
    }
}

impl<'a> Checkout<'a> {
    /// A tree that already lies on disk at `root`.
    pub fn on_disk(files: BTreeMap<String, FileEntry>, reader: &'a dyn BlobReader, root: PathBuf) -> Self {
        Checkout { files, reader, on_disk: Some(root), materialize_dir: None, materialized: OnceLock::new() }
    }

    /// A tree held elsewhere (object database, archive) that is written to `dir` on demand.
    pub fn in_store(files: BTreeMap<String, FileEntry>, reader: &'a dyn BlobReader, dir: PathBuf) -> Self {
        Checkout { files, reader, on_disk: None, materialize_dir: Some(dir), materialized: OnceLock::new() }
    }

    pub fn read(&self, path: &str) -> Result<Vec<u8>, SourceError> {
        self.reader.read(path)
    }

    pub fn contains_file(&self, path: &str) -> bool {
        self.files.contains_key(path)
    }

    /// Whether `dir` ("" for the root) holds at least one file.
    pub fn contains_dir(&self, dir: &str) -> bool {
        if dir.is_empty() {
            return !self.files.is_empty();
        }
        let prefix = format!("{dir}/");
        self.files.range(prefix.clone()..).next().is_some_and(|(p, _)| p.starts_with(&prefix))
    }

    /// Files under `dir` ("" for all), in path order.
    pub fn files_under<'s>(&'s self, dir: &str) -> impl Iterator<Item = (&'s String, &'s FileEntry)> + 's {
        let prefix = if dir.is_empty() { String::new() } else { format!("{dir}/") };
        self.files.range(prefix.clone()..).take_while(move |(p, _)| p.starts_with(&prefix))
    }

    /// A real folder holding the whole tree (written once per checkout when needed).
    pub fn materialize(&self) -> Result<PathBuf, String> {
        if let Some(root) = &self.on_disk {
            return Ok(root.clone());
        }
        self.materialized
            .get_or_init(|| {
                let Some(dir) = &self.materialize_dir else {
                    return Err("no folder to write the tree to".to_owned());
                };
                write_tree(self, dir).map_err(|e| e.to_string())?;
                Ok(dir.clone())
            })
            .clone()
    }
}

/// Writes every file below `dir`; a `.complete` marker next to it makes later calls free.
fn write_tree(checkout: &Checkout<'_>, dir: &Path) -> Result<(), SourceError> {
    let marker = dir.with_extension("complete");
    if marker.exists() && dir.is_dir() {
        return Ok(());
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| SourceError::io(format!("clearing {}", dir.display()), e))?;
    }
    for path in checkout.files.keys() {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| SourceError::io(format!("creating {}", parent.display()), e))?;
        }
        let data = checkout.read(path)?;
        std::fs::write(&target, data).map_err(|e| SourceError::io(format!("writing {}", target.display()), e))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| SourceError::io(format!("creating {}", dir.display()), e))?;
    std::fs::write(&marker, b"").map_err(|e| SourceError::io(format!("writing {}", marker.display()), e))?;
    Ok(())
}

/// Removes materialized trees in `parent` other than `keep` (bounded disk use: one tree).
pub(crate) fn prune_trees(parent: &Path, keep: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let stem = name.trim_end_matches(".complete");
        if stem != keep {
            let p = entry.path();
            let result = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
            if let Err(e) = result {
                tracing::debug!(path = %p.display(), error = %e, "could not remove an old tree");
            }
        }
    }
}

/// Joins `base` (a repository-relative folder) and a relative reference, resolving `.` and
/// `..`; `None` when the result leaves the repository.
pub(crate) fn join_relative(base: &str, reference: &str) -> Option<String> {
    let mut parts: Vec<&str> =
        if reference.starts_with('/') { Vec::new() } else { base.split('/').filter(|s| !s.is_empty()).collect() };
    for comp in reference.split('/') {
        match comp {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    Some(parts.join("/"))
}

/// The parent folder of a repository-relative path ("" at the root).
pub(crate) fn parent_dir(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

/// Normalises a configured sub-folder: no leading `./`, no trailing `/`.
pub(crate) fn normalize_sub(path: Option<&str>) -> String {
    join_relative("", path.unwrap_or("")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_resolve_inside_the_repository() {
        assert_eq!(
            join_relative("deploy/overlays/dev", "../../bases/backend").as_deref(),
            Some("deploy/bases/backend")
        );
        assert_eq!(join_relative("apps", "./production/").as_deref(), Some("apps/production"));
        assert_eq!(join_relative("a", "../../etc"), None);
        assert_eq!(normalize_sub(Some("./clusters/prod/")), "clusters/prod");
        assert_eq!(parent_dir("a/b/c.yaml"), "a/b");
        assert_eq!(parent_dir("c.yaml"), "");
    }
}
