//! A change to one file of a repository: what accepting a live change into Git produces
//! (`accept`) and what publishing a branch or a pull request writes (`publish`).

/// The new content of one file, by repository-relative path (`/`-separated, no leading `/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEdit {
    /// Repository-relative path.
    pub path: String,
    /// The whole new content of the file.
    pub content: Vec<u8>,
    /// Whether the file is new (it did not exist at the base revision).
    pub created: bool,
}
