//! `drift completions SHELL` and `drift man`: the shell completion scripts and the manual page,
//! generated from the command's own clap definitions, so that they never disagree with
//! `drift --help`. Both print to standard output, for a package or an image to install
//! (`/usr/share/bash-completion/completions/drift`, `/usr/share/man/man1/drift.1.gz`).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, CommandFactory};
use clap_complete::Shell;

/// Arguments of `drift completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Prints the completion script for `args.shell` on standard output.
pub fn completions(args: &CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut command = crate::Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "drift", &mut script);
    print(&script)?;
    Ok(ExitCode::SUCCESS)
}

/// The exit status section, which clap's definitions do not carry.
const EXIT_STATUS: &str = ".SH \"EXIT STATUS\"
.TP
\\fB0\\fR
No drift (or, for commands that do not compare, success).
.TP
\\fB1\\fR
Drift found, as \\fBkubectl diff\\fR says it; for \\fBdrift decide\\fR and \\fBdrift drifts get\\fR, no such drift or a decision the store refused.
.TP
\\fB2\\fR or more
An error: a usage error, a configuration that does not validate, a source or a store that failed.
";

/// Arguments of `drift man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// The page of a subcommand: its words (`drifts list`) or its page name
    /// (`drift-drifts-list`); none for drift(1).
    pub command: Vec<String>,
    /// Print the name of every page, one a line: drift, drift-diff, drift-drifts-list, ...
    #[arg(long, conflicts_with = "command")]
    pub list: bool,
}

/// The command tree with the names clap gives it when it builds it: each subcommand's display
/// name is its page name (`drift-drifts-list`), which is also how the pages refer to each other.
fn built() -> clap::Command {
    let mut command = crate::Cli::command();
    command.build();
    command
}

/// Every command of the tree, depth first (clap's `help` subcommands included: the pages list
/// them, so they have pages too).
fn walk<'a>(command: &'a clap::Command, into: &mut Vec<&'a clap::Command>) {
    into.push(command);
    for sub in command.get_subcommands() {
        walk(sub, into);
    }
}

fn page_name(command: &clap::Command) -> &str {
    command.get_display_name().unwrap_or_else(|| command.get_name())
}

/// The names of every page `drift man` prints: drift, then one per subcommand.
pub fn pages() -> Vec<String> {
    let root = built();
    let mut all = Vec::new();
    walk(&root, &mut all);
    all.into_iter().map(|c| page_name(c).to_owned()).collect()
}

/// The manual page in roff of the command that `words` name (none: drift(1)): name, synopsis,
/// description, options and subcommands from clap; drift(1) also says what the exit codes mean.
pub fn manual(words: &[String]) -> anyhow::Result<Vec<u8>> {
    let root = built();
    let wanted = match words {
        [] => "drift".to_owned(),
        [one] if one == "drift" || one.starts_with("drift-") => one.clone(),
        _ => format!("drift-{}", words.join("-")),
    };
    let mut all = Vec::new();
    walk(&root, &mut all);
    let Some(command) = all.into_iter().find(|c| page_name(c) == wanted) else {
        anyhow::bail!("no manual page {wanted}; `drift man --list` names them all");
    };
    // A subcommand has no version of its own: every page says "drift VERSION" as drift(1) does.
    let man = clap_mangen::Man::new(command.clone()).source(format!("drift {}", env!("CARGO_PKG_VERSION")));
    let mut page = Vec::new();
    if wanted != "drift" {
        man.render(&mut page)?;
        return Ok(page);
    }
    man.render_title(&mut page)?;
    man.render_name_section(&mut page)?;
    man.render_synopsis_section(&mut page)?;
    man.render_description_section(&mut page)?;
    man.render_options_section(&mut page)?;
    man.render_subcommands_section(&mut page)?;
    page.extend_from_slice(EXIT_STATUS.as_bytes());
    man.render_version_section(&mut page)?;
    Ok(page)
}

/// Prints a manual page (`drift man | man -l -`) or, with `--list`, the names of all of them.
pub fn man(args: &ManArgs) -> anyhow::Result<ExitCode> {
    if args.list {
        print(pages().join("\n").as_bytes())?;
        print(b"\n")?;
    } else {
        print(&manual(&args.command)?)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print(bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes).and_then(|()| out.flush()).context("cannot write to standard output")
}
