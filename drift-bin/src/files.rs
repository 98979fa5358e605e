//! Reading manifests from files and folders.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use drift_core::manifest::parse_manifests;
use drift_core::{Resource, SourceWarning};

/// Manifests read from a path: a YAML or JSON file, or a folder of them (recursively, sorted).
#[derive(Debug, Default)]
pub struct Loaded {
    pub resources: Vec<Resource>,
    pub warnings: Vec<SourceWarning>,
}

fn is_manifest(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
}

fn collect_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    if meta.is_file() {
        out.push(path.to_owned());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("cannot list {}", path.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    entries.sort();
    for p in entries {
        let hidden = p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'));
        if hidden {
            continue;
        }
        if p.is_dir() {
            collect_files(&p, out)?;
        } else if is_manifest(&p) {
            out.push(p);
        }
    }
    Ok(())
}

fn load_files(files: &[PathBuf]) -> Loaded {
    let mut loaded = Loaded::default();
    for file in files {
        let shown = file.display().to_string();
        match std::fs::read_to_string(file) {
            Ok(text) => {
                let parsed = parse_manifests(&text, &shown);
                loaded.resources.extend(parsed.resources);
                loaded.warnings.extend(parsed.warnings);
            }
            Err(e) => loaded.warnings.push(
                SourceWarning::error(drift_core::ErrorKind::InvalidInput, format!("cannot read: {e}"))
                    .at(shown, None, None),
            ),
        }
    }
    loaded
}

/// Loads every manifest under `path`. A file that cannot be read as text is a warning.
pub fn load(path: &Path) -> Result<Loaded> {
    let mut files = Vec::new();
    collect_files(path, &mut files)?;
    // Parsing dominates: spread the files over the cores, keeping their order.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    let chunk = files.len().div_ceil(workers).max(1);
    let parts: Vec<Loaded> = std::thread::scope(|s| {
        let handles: Vec<_> = files.chunks(chunk).map(|part| s.spawn(move || load_files(part))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    let mut loaded = Loaded::default();
    for part in parts {
        loaded.resources.extend(part.resources);
        loaded.warnings.extend(part.warnings);
    }
    Ok(loaded)
}
