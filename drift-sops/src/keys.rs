//! The age identities that open SOPS files, read as sops reads them from the environment.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use age::x25519;

/// The variable holding age identities (`AGE-SECRET-KEY-1...`, one or more lines).
pub const KEY_VAR: &str = "SOPS_AGE_KEY";
/// The variable naming a file of age identities.
pub const KEY_FILE_VAR: &str = "SOPS_AGE_KEY_FILE";

/// What is wrong with the identities given; names the variable and the line, never a key.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    /// A line that is not an age identity.
    #[error("{origin}, line {line}: not an age identity (AGE-SECRET-KEY-1...)")]
    NotAnIdentity {
        /// `SOPS_AGE_KEY` or the file of `SOPS_AGE_KEY_FILE`.
        origin: String,
        /// From 1.
        line: usize,
    },
    /// The file of `SOPS_AGE_KEY_FILE` cannot be read.
    #[error("{KEY_FILE_VAR} names {path}, which cannot be read: {source}")]
    File {
        /// The path given.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

impl From<KeysError> for drift_core::Error {
    fn from(e: KeysError) -> Self {
        drift_core::Error::config(e.to_string())
    }
}

/// Age identities that open SOPS files, with their public keys (recipients). `Debug` shows the
/// recipients only.
#[derive(Clone, Default)]
pub struct SopsKeys {
    pub(crate) identities: Arc<[x25519::Identity]>,
    recipients: Arc<[String]>,
}

impl fmt::Debug for SopsKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SopsKeys").field("recipients", &self.recipients).finish_non_exhaustive()
    }
}

impl SopsKeys {
    /// The identities of the process environment: every line of `SOPS_AGE_KEY`, then every line
    /// of the file `SOPS_AGE_KEY_FILE` names (both may be set). Empty when neither is set.
    pub fn from_env() -> Result<Self, KeysError> {
        Self::from_env_with(|name| std::env::var(name).ok())
    }

    /// [`SopsKeys::from_env`] with the variables read by `var` (for tests and embedders).
    pub fn from_env_with(var: impl Fn(&str) -> Option<String>) -> Result<Self, KeysError> {
        let mut keys = Vec::new();
        if let Some(text) = var(KEY_VAR).filter(|t| !t.trim().is_empty()) {
            keys.extend(parse_identities(&text, KEY_VAR)?);
        }
        if let Some(path) = var(KEY_FILE_VAR).filter(|p| !p.trim().is_empty()) {
            let text =
                std::fs::read_to_string(&path).map_err(|source| KeysError::File { path: path.clone(), source })?;
            keys.extend(parse_identities(&text, &format!("{KEY_FILE_VAR} ({path})"))?);
        }
        Ok(Self::from_identities(keys))
    }

    /// Identities from the text of an age identity file: one `AGE-SECRET-KEY-1...` a line,
    /// blank lines and `#` comments ignored.
    pub fn parse(text: &str) -> Result<Self, KeysError> {
        Ok(Self::from_identities(parse_identities(text, "identities")?))
    }

    fn from_identities(identities: Vec<x25519::Identity>) -> Self {
        let mut recipients: Vec<String> = identities.iter().map(|i| i.to_public().to_string()).collect();
        recipients.sort();
        recipients.dedup();
        SopsKeys { identities: identities.into(), recipients: recipients.into() }
    }

    /// Whether no identity was given.
    pub fn is_empty(&self) -> bool {
        self.identities.is_empty()
    }

    /// The public keys (`age1...`) of the identities, sorted.
    pub fn recipients(&self) -> Arc<[String]> {
        Arc::clone(&self.recipients)
    }
}

fn parse_identities(text: &str, origin: &str) -> Result<Vec<x25519::Identity>, KeysError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let identity = x25519::Identity::from_str(line)
            .map_err(|_| KeysError::NotAnIdentity { origin: origin.to_owned(), line: n + 1 })?;
        out.push(identity);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use age::secrecy::ExposeSecret;

    #[test]
    fn identities_from_both_variables_and_no_key_in_debug_or_errors() {
        let a = x25519::Identity::generate();
        let b = x25519::Identity::generate();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("keys.txt");
        std::fs::write(&file, format!("# created: now\n# public key: x\n{}\n", b.to_string().expose_secret())).unwrap();
        let a_text = a.to_string().expose_secret().to_owned();
        let file_text = file.display().to_string();
        let keys = SopsKeys::from_env_with(|v| match v {
            KEY_VAR => Some(format!("{a_text}\n")),
            KEY_FILE_VAR => Some(file_text.clone()),
            _ => None,
        })
        .unwrap();
        let mut want = vec![a.to_public().to_string(), b.to_public().to_string()];
        want.sort();
        assert_eq!(&*keys.recipients(), want.as_slice());
        assert!(!format!("{keys:?}").contains("AGE-SECRET-KEY"), "{keys:?}");

        let bad = format!("{a_text}\nAGE-SECRET-KEY-1NOPE{}\n", &a_text[20..]);
        let err = SopsKeys::from_env_with(|v| (v == KEY_VAR).then(|| bad.clone())).unwrap_err().to_string();
        assert_eq!(err, "SOPS_AGE_KEY, line 2: not an age identity (AGE-SECRET-KEY-1...)");
        assert!(!err.contains(&a_text[16..]));
        assert!(SopsKeys::from_env_with(|_| None).unwrap().is_empty());
        let missing = SopsKeys::from_env_with(|v| (v == KEY_FILE_VAR).then(|| "/nonexistent/k".into()));
        assert!(missing.unwrap_err().to_string().starts_with("SOPS_AGE_KEY_FILE names /nonexistent/k"));
    }
}
