//! `drift render`: the desired state exactly as the detector sees it.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use drift_core::progress::Progress;
use drift_source_git::{OutputFormat, RenderRequest, RendererKind, format_snapshot, has_errors, render_observed};

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
    /// yaml or json.
    #[arg(long, short, default_value = "yaml", value_parser = ["yaml", "json"])]
    pub output: String,
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
    let format = if args.output == "json" { OutputFormat::Json } else { OutputFormat::Yaml };
    print!("{}", format_snapshot(&snapshot, format));
    if has_errors(&snapshot) {
        for w in snapshot.warnings.iter().filter(|w| w.fatal) {
            eprintln!("error: {w}");
        }
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}
