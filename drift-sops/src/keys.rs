//! The age identities that open SOPS files, read as sops reads them from the environment.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use age::x25519;

/// The variable holding age identities (`AGE-SECRET-KEY-1...`, one or more lines).
pub const KEY_VAR: &str = "SOPS_AGE_KEY";
/// The variable naming a file of age identities.
pub const KEY_FILE_VAR: &str = "SOPS_AGE_KEY_FILE";
/// The variable holding a command (split as a shell would, run without one) that prints age
/// identities on its standard output.
pub const KEY_CMD_VAR: &str = "SOPS_AGE_KEY_CMD";
/// Where sops looks for age identities in the user's configuration folder
/// (`$XDG_CONFIG_HOME`, else `$HOME/.config`; on macOS `$HOME/Library/Application Support`).
pub const USER_KEY_FILE: &str = "sops/age/keys.txt";

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
    /// The user's key file (`sops/age/keys.txt` in the configuration folder) exists but cannot
    /// be read.
    #[error("the age key file {path} cannot be read: {source}")]
    UserFile {
        /// Its path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The command of `SOPS_AGE_KEY_CMD` could not run or failed. Its output is never shown.
    #[error("{KEY_CMD_VAR}: {message}")]
    Command {
        /// What went wrong: the program and the exit status or the reason it did not start.
        message: String,
    },
}

impl From<KeysError> for drift_model::Error {
    fn from(e: KeysError) -> Self {
        drift_model::Error::config(e.to_string())
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
    /// The identities of the process environment, found where sops finds them, all of them
    /// together: every line of `SOPS_AGE_KEY`, of the file `SOPS_AGE_KEY_FILE` names, of what the
    /// command of `SOPS_AGE_KEY_CMD` prints, and of the user's key file
    /// ([`SopsKeys::user_key_file`]) when it exists. Empty when none is there.
    pub fn from_env() -> Result<Self, KeysError> {
        Self::from_env_with(|name| std::env::var(name).ok())
    }

    /// [`SopsKeys::from_env`] with the variables read by `var` (for tests and embedders).
    pub fn from_env_with(var: impl Fn(&str) -> Option<String>) -> Result<Self, KeysError> {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let mut keys = Vec::new();
        if let Some(text) = set(KEY_VAR) {
            keys.extend(parse_identities(&text, KEY_VAR)?);
        }
        if let Some(path) = set(KEY_FILE_VAR) {
            let text =
                std::fs::read_to_string(&path).map_err(|source| KeysError::File { path: path.clone(), source })?;
            keys.extend(parse_identities(&text, &format!("{KEY_FILE_VAR} ({path})"))?);
        }
        if let Some(command) = set(KEY_CMD_VAR) {
            let text = run_key_command(&command)?;
            keys.extend(parse_identities(&text, &format!("the output of {KEY_CMD_VAR}"))?);
        }
        if let Some(path) = Self::user_key_file(&var) {
            match std::fs::read_to_string(&path) {
                Ok(text) => keys.extend(parse_identities(&text, &path.display().to_string())?),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(KeysError::UserFile { path: path.display().to_string(), source }),
            }
        }
        Ok(Self::from_identities(keys))
    }

    /// The user's key file, where sops looks without being told: `sops/age/keys.txt` in
    /// `$XDG_CONFIG_HOME`, else in `$HOME/.config` (on macOS, `$HOME/Library/Application
    /// Support`); `None` when neither variable is set.
    pub fn user_key_file(var: impl Fn(&str) -> Option<String>) -> Option<std::path::PathBuf> {
        let set = |name: &str| var(name).filter(|v| !v.is_empty());
        let config = match set("XDG_CONFIG_HOME") {
            Some(dir) => std::path::PathBuf::from(dir),
            None if cfg!(target_os = "macos") => {
                std::path::PathBuf::from(set("HOME")?).join("Library").join("Application Support")
            }
            None => std::path::PathBuf::from(set("HOME")?).join(".config"),
        };
        Some(config.join(USER_KEY_FILE))
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

/// Runs the command of `SOPS_AGE_KEY_CMD` (split as a shell would, run without one, as sops
/// does) and returns what it printed. Neither its output nor its standard error goes into an
/// error: they may hold keys.
fn run_key_command(command: &str) -> Result<String, KeysError> {
    let words = shlex::split(command)
        .filter(|w| !w.is_empty())
        .ok_or_else(|| KeysError::Command { message: "not a command line (unbalanced quotes?)".to_owned() })?;
    let program = &words[0];
    let out = std::process::Command::new(program)
        .args(&words[1..])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| KeysError::Command { message: format!("{program} could not run: {e}") })?;
    if !out.status.success() {
        return Err(KeysError::Command { message: format!("{program} failed ({})", out.status) });
    }
    String::from_utf8(out.stdout)
        .map_err(|_| KeysError::Command { message: format!("{program} printed something that is not text") })
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

    #[test]
    fn the_user_key_file_and_a_key_command_as_sops_finds_them() {
        let (a, b) = (x25519::Identity::generate(), x25519::Identity::generate());
        let config = tempfile::tempdir().unwrap();
        let xdg = config.path().display().to_string();
        let home = tempfile::tempdir().unwrap();
        let home_text = home.path().display().to_string();
        // Nothing there: no key, no error.
        let env = |xdg: Option<&str>| {
            let (xdg, home) = (xdg.map(str::to_owned), home_text.clone());
            move |v: &str| match v {
                "XDG_CONFIG_HOME" => xdg.clone(),
                "HOME" => Some(home.clone()),
                _ => None,
            }
        };
        assert!(SopsKeys::from_env_with(env(Some(&xdg))).unwrap().is_empty());
        assert!(SopsKeys::from_env_with(env(None)).unwrap().is_empty());
        assert_eq!(SopsKeys::user_key_file(|_| None), None);

        // $XDG_CONFIG_HOME/sops/age/keys.txt, else $HOME/.config/sops/age/keys.txt.
        let in_xdg = config.path().join(USER_KEY_FILE);
        std::fs::create_dir_all(in_xdg.parent().unwrap()).unwrap();
        std::fs::write(&in_xdg, format!("# created: now\n{}\n", a.to_string().expose_secret())).unwrap();
        let keys = SopsKeys::from_env_with(env(Some(&xdg))).unwrap();
        assert_eq!(&*keys.recipients(), [a.to_public().to_string()].as_slice());
        if !cfg!(target_os = "macos") {
            let in_home = home.path().join(".config").join(USER_KEY_FILE);
            assert_eq!(SopsKeys::user_key_file(env(None)), Some(in_home.clone()));
            std::fs::create_dir_all(in_home.parent().unwrap()).unwrap();
            std::fs::write(&in_home, b.to_string().expose_secret()).unwrap();
            let keys = SopsKeys::from_env_with(env(None)).unwrap();
            assert_eq!(&*keys.recipients(), [b.to_public().to_string()].as_slice());
        }

        // SOPS_AGE_KEY_CMD: its output, with the other places.
        let printed = config.path().join("printed.txt");
        std::fs::write(&printed, b.to_string().expose_secret()).unwrap();
        let cmd = format!("cat '{}'", printed.display());
        let with = |cmd: String| {
            let xdg = xdg.clone();
            move |v: &str| match v {
                KEY_CMD_VAR => Some(cmd.clone()),
                "XDG_CONFIG_HOME" => Some(xdg.clone()),
                _ => None,
            }
        };
        let keys = SopsKeys::from_env_with(with(cmd)).unwrap();
        let mut want = vec![a.to_public().to_string(), b.to_public().to_string()];
        want.sort();
        assert_eq!(&*keys.recipients(), want.as_slice());

        // A command that fails, cannot start, or prints a bad line: said, with no output shown.
        let secret = b.to_string().expose_secret().to_owned();
        let leak = format!("sh -c 'echo {secret}; echo {secret} >&2; exit 3'");
        let err = SopsKeys::from_env_with(with(leak)).unwrap_err().to_string();
        assert!(err.starts_with("SOPS_AGE_KEY_CMD: sh failed (exit status: 3)"), "{err}");
        assert!(!err.contains(&secret[16..]), "{err}");
        let err = SopsKeys::from_env_with(with("/nonexistent/keys-cmd".into())).unwrap_err().to_string();
        assert!(err.starts_with("SOPS_AGE_KEY_CMD: /nonexistent/keys-cmd could not run"), "{err}");
        let err = SopsKeys::from_env_with(with("echo 'unbalanced".into())).unwrap_err().to_string();
        assert!(err.contains("not a command line"), "{err}");
        let err = SopsKeys::from_env_with(with("echo not-a-key".into())).unwrap_err().to_string();
        assert_eq!(err, "the output of SOPS_AGE_KEY_CMD, line 1: not an age identity (AGE-SECRET-KEY-1...)");

        // A key file that is there but cannot be read (a folder in its place) is an error.
        std::fs::remove_file(&in_xdg).unwrap();
        std::fs::create_dir(&in_xdg).unwrap();
        let err = SopsKeys::from_env_with(env(Some(&xdg))).unwrap_err().to_string();
        assert!(err.starts_with(&format!("the age key file {} cannot be read", in_xdg.display())), "{err}");
    }
}
