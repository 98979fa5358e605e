//! `drift render`: the desired state exactly as the detector sees it.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use drift_core::DesiredSnapshot;
use drift_core::progress::Progress;
use drift_git::{OutputFormat, RenderRequest, RendererKind, format_snapshot, has_errors, render_observed};

use crate::output::Format;

/// Arguments of `drift render`.
#[derive(Debug, Args)]
pub struct RenderArgs {
    /// A local folder, a git URL, or `github:OWNER/REPO`.
    #[arg(long)]
    pub repo: String,
    /// Branch, tag or commit.
    #[arg(long = "ref")]
    pub reference: Option<String>,
    /// Sub-folder.
    #[arg(long)]
    pub path: Option<String>,
    /// auto, plain, kustomize or helm.
    #[arg(long, default_value = "auto")]
    pub renderer: RendererKind,
    /// Output format: yaml (the manifests, ready for `kubectl apply -f -`), json (one document
    /// with each object's source) or table (one line per object).
    #[arg(long, short, value_enum, default_value_t = Format::Yaml)]
    pub output: Format,
}

/// Runs `drift render`: exit 2 with the errors when something does not render.
pub async fn run(args: &RenderArgs) -> Result<ExitCode> {
    let request = RenderRequest {
        repo: args.repo.clone(),
        reference: args.reference.clone(),
        path: args.path.clone(),
        renderer: args.renderer,
        cache_dir: None,
    };
    let progress = Progress::new();
    let line = crate::progress::Line::start("render", &progress);
    let snapshot = render_observed(&request, progress).await;
    line.finish();
    let snapshot = snapshot?;
    match args.output {
        Format::Json => print!("{}", format_snapshot(&snapshot, OutputFormat::Json)),
        Format::Yaml => print!("{}", format_snapshot(&snapshot, OutputFormat::Yaml)),
        Format::Table => print_table(&snapshot),
    }
    if has_errors(&snapshot) {
        for w in snapshot.warnings.iter().filter(|w| w.fatal) {
            eprintln!("error: {w}");
        }
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}

/// One line per object: kind, namespace and name, and the file (and document) it came from.
fn print_table(snapshot: &DesiredSnapshot) {
    println!("{:<24}  {:<48}  SOURCE", "KIND", "OBJECT");
    for r in &snapshot.resources {
        let k = &r.key;
        let ns = k.namespace.as_deref().map(|n| format!("{n}/")).unwrap_or_default();
        let p = &r.provenance;
        let source = match (&p.path, p.document) {
            (Some(path), Some(d)) if d > 0 => format!("{path}#{d}"),
            (Some(path), _) => path.clone(),
            (None, _) => String::new(),
        };
        println!("{:<24}  {:<48}  {source}", k.kind, format!("{ns}{}", k.name));
    }
    println!(
        "{} object(s) from {} at {}",
        snapshot.resources.len(),
        snapshot.repository,
        snapshot.revision.as_deref().unwrap_or("-")
    );
}
