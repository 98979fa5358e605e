//! External renderers: `kustomize build` / `kubectl kustomize` and `helm template`.
//!
//! A failure here is reported for the one application being rendered (a
//! [`drift_model::SourceWarning`]), never for the whole repository.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::config::RenderConfig;

/// Kustomization file names kustomize accepts, in its order of preference.
pub(crate) const KUSTOMIZATION_FILES: &[&str] = &["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Finds an executable on `PATH` (or checks a path given with a `/`).
pub(crate) fn find_program(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| is_executable(candidate))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The kustomize program and the arguments before the folder.
pub(crate) fn kustomize_command(cfg: &RenderConfig) -> Result<(PathBuf, Vec<&'static str>), String> {
    let candidates: Vec<String> = match &cfg.kustomize_binary {
        Some(b) => vec![b.clone()],
        None => vec!["kustomize".to_owned(), "kubectl".to_owned()],
    };
    for name in &candidates {
        if let Some(program) = find_program(name) {
            let is_kubectl = program.file_name().is_some_and(|f| f.to_string_lossy().starts_with("kubectl"));
            let args = if is_kubectl { vec!["kustomize"] } else { vec!["build"] };
            return Ok((program, args));
        }
    }
    Err(match &cfg.kustomize_binary {
        Some(b) => format!("the configured kustomize program `{b}` was not found"),
        None => "neither `kustomize` nor `kubectl` was found on PATH; install one of them to render Kustomize folders"
            .to_owned(),
    })
}

/// Runs `kustomize build DIR` (or `kubectl kustomize DIR`) and returns its output.
pub(crate) fn kustomize_build(cfg: &RenderConfig, dir: &Path) -> Result<String, String> {
    let (program, args) = kustomize_command(cfg)?;
    let mut cmd = Command::new(&program);
    cmd.args(args).arg(dir);
    run(cmd, cfg.render_timeout, &program)
}

/// What `helm template` is asked to render.
/// How helm reads a parameter's value: `--set` (typed, commas and braces are syntax),
/// `--set-string` (a string), `--set-literal` (the value verbatim).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum SetAs {
    Set,
    String,
    Literal,
}

#[derive(Debug, Clone)]
pub(crate) struct HelmJob<'a> {
    pub release: &'a str,
    pub chart_dir: PathBuf,
    pub namespace: Option<&'a str>,
    pub values_files: Vec<PathBuf>,
    pub inline_values: Option<&'a serde_json::Value>,
    /// `--set`, `--set-string` or `--set-literal` `name=value`, after the values files.
    pub parameters: &'a [(String, String, SetAs)],
    pub include_crds: bool,
}

/// Runs `helm template RELEASE CHART [--namespace NS] [-f VALUES]...`.
pub(crate) fn helm_template(cfg: &RenderConfig, job: &HelmJob<'_>) -> Result<String, String> {
    let name = cfg.helm.binary.clone().unwrap_or_else(|| "helm".to_owned());
    let program = find_program(&name)
        .ok_or_else(|| format!("`{name}` was not found on PATH; install Helm 3 to render charts (helm template)"))?;
    let mut cmd = Command::new(&program);
    cmd.arg("template").arg(job.release).arg(&job.chart_dir);
    if let Some(ns) = job.namespace {
        cmd.arg("--namespace").arg(ns);
    }
    for f in &job.values_files {
        cmd.arg("--values").arg(f);
    }
    let _inline_file;
    if let Some(values) = job.inline_values {
        let file = tempfile::Builder::new()
            .prefix("drift-helm-values-")
            .suffix(".json")
            .tempfile()
            .map_err(|e| format!("cannot write inline values: {e}"))?;
        serde_json::to_writer(file.as_file(), values).map_err(|e| format!("cannot write inline values: {e}"))?;
        cmd.arg("--values").arg(file.path());
        _inline_file = file;
    }
    for (name, value, set_as) in job.parameters {
        let flag = match set_as {
            SetAs::Set => "--set",
            SetAs::String => "--set-string",
            SetAs::Literal => "--set-literal",
        };
        cmd.arg(flag).arg(format!("{name}={value}"));
    }
    if job.include_crds {
        cmd.arg("--include-crds");
    }
    run(cmd, cfg.render_timeout, &program)
}

/// Runs a command with a deadline; stdout on success, a short message with stderr otherwise.
fn run(mut cmd: Command, timeout: Duration, program: &Path) -> Result<String, String> {
    let shown = program.file_name().map_or_else(|| program.display().to_string(), |f| f.to_string_lossy().into_owned());
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("cannot start `{shown}`: {e}"))?;
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    // Readers on their own threads, so a chatty program cannot fill a pipe and stall.
    let out_thread = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stdout.as_mut() {
            let _ = s.read_to_end(&mut buf);
        }
        buf
    });
    let err_thread = std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stderr.as_mut() {
            let _ = s.read_to_end(&mut buf);
        }
        buf
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("`{shown}` did not finish within {}s and was stopped", timeout.as_secs()));
            }
            // Polling a child process: there is no portable blocking wait with a deadline.
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("waiting for `{shown}`: {e}")),
        }
    };
    let out = out_thread.join().unwrap_or_default();
    let err = err_thread.join().unwrap_or_default();
    if status.success() {
        String::from_utf8(out).map_err(|_| format!("`{shown}` printed output that is not UTF-8"))
    } else {
        let err = String::from_utf8_lossy(&err);
        let err: String = err.trim().lines().take(20).collect::<Vec<_>>().join("\n");
        Err(format!("`{shown}` failed ({status}): {err}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_programs_are_named() {
        let cfg = RenderConfig { kustomize_binary: Some("kustomize-not-installed".into()), ..Default::default() };
        let err = kustomize_build(&cfg, Path::new("/tmp")).unwrap_err();
        assert!(err.contains("kustomize-not-installed"), "{err}");
        let mut cfg = RenderConfig::default();
        cfg.helm.binary = Some("helm-not-installed".into());
        let job = HelmJob {
            release: "r",
            chart_dir: PathBuf::from("/tmp"),
            namespace: None,
            values_files: vec![],
            inline_values: None,
            parameters: &[],
            include_crds: false,
        };
        let err = helm_template(&cfg, &job).unwrap_err();
        assert!(err.contains("helm-not-installed") && err.contains("not found"), "{err}");
    }

    #[test]
    fn failing_program_reports_stderr() {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg("echo broken kustomization >&2; exit 3");
        let err = run(cmd, Duration::from_secs(30), Path::new("sh")).unwrap_err();
        assert!(err.contains("broken kustomization"), "{err}");
    }
}
