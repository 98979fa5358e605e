//! Printing reports: a coloured table for people, JSON and YAML for tools.
//!
//! The JSON shape is stable (docs/drift-types.md): `{"drifts": [...], "summary": {...},
//! "warnings": [...]}`; each drift carries `resource` (`apiVersion`, `kind`, `namespace`,
//! `name`), `drift_type`, `severity`, `path`, `git_value`, `cluster_value`, `changed_by`,
//! `changed_at`, `classification`, `decision_source`, `recommended_action`, and `revert` (the
//! RFC 6902 patch that restores Git's value and its kubectl command) when there is one. With
//! policies checked (`--policies`, `policies:`), `findings` lists the policy findings and
//! `findings_summary` counts them, apart from the drifts and their summary (docs/policies.md).

use std::io::{IsTerminal, Write};

use anyhow::{Context, Result};
use drift_core::policy::{Finding, FindingSummary};
use drift_core::{Drift, ScanReport, Severity, SourceWarning, Summary};
use owo_colors::OwoColorize;
use serde::Serialize;
use serde_json::Value;

mod pretty;

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A readable table, coloured on a terminal.
    Table,
    /// One JSON object.
    Json,
    /// The same object as YAML.
    Yaml,
}

/// `-o/--output` with `--json`, its older spelling, of the commands that had only `--json`
/// (`drift drifts list`, `drift findings list`): `--json` is `-o json`, byte for byte.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// The same as `-o json` (the flag of earlier versions, kept for scripts).
    #[arg(long, hide = true, conflicts_with = "output")]
    pub json: bool,
}

impl OutputArgs {
    /// The format asked for.
    pub fn format(&self) -> Format {
        if self.json { Format::Json } else { self.output }
    }
}

/// Prints a document on standard output in a format: `table` through the command's own
/// `table`, JSON and YAML through [`write_data`], the one writer of every command's `-o json`
/// and `-o yaml`.
pub fn print_data<T: Serialize + ?Sized>(doc: &T, format: Format, table: impl FnOnce(&T)) -> Result<()> {
    let yaml = match format {
        Format::Table => {
            table(doc);
            return Ok(());
        }
        Format::Json => false,
        Format::Yaml => true,
    };
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    write_data(doc, yaml, &mut out)?;
    out.flush()?;
    Ok(())
}

/// Writes a document as indented JSON with a final newline, or (`yaml`) the same value as YAML.
fn write_data<T: Serialize + ?Sized>(doc: &T, yaml: bool, out: &mut dyn Write) -> Result<()> {
    if yaml {
        let value = serde_json::to_value(doc)?;
        write!(out, "{}", serde_saphyr::to_string(&value)?)?;
    } else {
        serde_json::to_writer_pretty(&mut *out, doc)?;
        writeln!(out)?;
    }
    Ok(())
}

/// The stable machine-readable document.
#[derive(Debug, Serialize)]
pub struct Document<'a> {
    pub drifts: &'a [Drift],
    pub summary: &'a Summary,
    pub warnings: &'a [SourceWarning],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<&'a str>,
    /// Policy findings, when policies were checked (empty when none failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings: Option<&'a [Finding]>,
    /// Their counts, apart from the drift summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub findings_summary: Option<FindingSummary>,
}

impl<'a> Document<'a> {
    /// The document of a report, with `drifts` for its drifts.
    fn of(report: &'a ScanReport, drifts: &'a [Drift]) -> Self {
        Document {
            drifts,
            summary: &report.summary,
            warnings: &report.warnings,
            revision: report.revision.as_deref(),
            findings: checked(report).then_some(report.findings.as_slice()),
            findings_summary: checked(report).then(|| FindingSummary::of(&report.findings)),
        }
    }
}

/// Prints a report in a format, through a buffer of its own (standard output flushes at every
/// line: a report of 25,000 drifts was 750,000 writes).
pub fn print_report(report: &ScanReport, format: Format, out: &mut dyn Write) -> Result<()> {
    let mut buffered = std::io::BufWriter::with_capacity(64 * 1024, out);
    write_report(report, format, &mut buffered)?;
    buffered.flush()?;
    Ok(())
}

fn write_report(report: &ScanReport, format: Format, out: &mut dyn Write) -> Result<()> {
    match format {
        Format::Json => write_report_json(report, out)?,
        Format::Yaml => write_data(&Document::of(report, &report.drifts), true, out)?,
        Format::Table => {
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
            print_table(report, color, out)?;
        }
    }
    Ok(())
}

/// A report as [`write_data`] writes it in JSON, its drifts rendered on every core
/// ([`pretty::write_elements`]): the document without them, with the list written into its
/// `[]`. (The drifts are the document's first member: it starts `{\n  "drifts": []`.)
fn write_report_json(report: &ScanReport, out: &mut dyn Write) -> Result<()> {
    const HEAD: &[u8] = b"{\n  \"drifts\": [";
    let without = serde_json::to_vec_pretty(&Document::of(report, &[]))?;
    let tail = without.strip_prefix(HEAD).context("the report document starts with its drifts")?;
    out.write_all(HEAD)?;
    pretty::write_elements(&report.drifts, 1, out)?;
    out.write_all(tail)?;
    writeln!(out)?;
    Ok(())
}

/// Whether the report checked policies (then its findings are shown, even when there are none).
fn checked(report: &ScanReport) -> bool {
    !report.policy_sides.is_empty()
}

/// A value as the table shows it: a string as it is, anything else as JSON cut at 120 characters.
pub(crate) fn short(v: &Option<Value>) -> String {
    match v {
        None => "<absent>".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            let s = other.to_string();
            if s.len() > 120 {
                format!("{}…", &s[..s.char_indices().nth(117).map_or(s.len(), |(i, _)| i)])
            } else {
                s
            }
        }
    }
}

fn paint(text: &str, sev: Severity, color: bool) -> String {
    if !color {
        return text.to_owned();
    }
    match sev {
        Severity::Critical => text.red().bold().to_string(),
        Severity::High => text.red().to_string(),
        Severity::Medium => text.yellow().to_string(),
        Severity::Low => text.cyan().to_string(),
    }
}

fn print_table(report: &ScanReport, color: bool, out: &mut dyn Write) -> Result<()> {
    let mut current = None;
    for d in &report.drifts {
        let key = d.key();
        if current.as_ref() != Some(&key) {
            let ns = d.resource.namespace.as_deref().map(|n| format!("{n}/")).unwrap_or_default();
            let head = format!("{} {}{}", d.resource.kind, ns, d.resource.name);
            let source = d.source_path.as_deref().map(|p| format!("  ({p})")).unwrap_or_default();
            writeln!(out, "{}{}", if color { head.bold().to_string() } else { head }, source)?;
            current = Some(key);
        }
        let sev = format!("{:<8}", d.severity.as_str());
        let path = if d.path.is_empty() { "<object>".to_owned() } else { d.path.clone() };
        writeln!(out, "  {} {:<22} {}", paint(&sev, d.severity, color), d.drift_type.as_str(), path)?;
        let (minus, plus) = if d.drift_type == drift_core::DriftType::MissingResource {
            ("    - git:     the object".to_owned(), "    + cluster: <absent>".to_owned())
        } else if d.drift_type == drift_core::DriftType::UnmanagedResource {
            ("    - git:     <not declared>".to_owned(), "    + cluster: the object".to_owned())
        } else {
            (format!("    - git:     {}", short(&d.git_value)), format!("    + cluster: {}", short(&d.cluster_value)))
        };
        writeln!(out, "{}", if color { minus.green().to_string() } else { minus })?;
        writeln!(out, "{}", if color { plus.red().to_string() } else { plus })?;
        let by = match (&d.changed_by, d.changed_at) {
            (Some(m), Some(t)) => format!("{m} at {}", t.to_rfc3339()),
            (Some(m), None) => m.clone(),
            _ => "unknown".to_owned(),
        };
        writeln!(out, "      changed by {by}; {}; {}", d.classification.as_str(), d.recommended_action.as_str())?;
    }
    if checked(report) && !report.findings.is_empty() {
        print_findings(report, color, out)?;
    }
    for w in &report.warnings {
        let label = if w.fatal { "error" } else { "note" };
        writeln!(out, "{label}: {w}")?;
    }
    let s = &report.summary;
    let by_sev: Vec<String> = Severity::ALL
        .iter()
        .rev()
        .filter_map(|v| s.by_severity.get(v).map(|n| format!("{n} {}", v.as_str())))
        .collect();
    writeln!(
        out,
        "{} drift(s) in {} of {} object(s){}",
        s.drifts,
        s.resources_drifted,
        s.resources_compared,
        if by_sev.is_empty() { String::new() } else { format!(": {}", by_sev.join(", ")) }
    )?;
    if checked(report) {
        let f = FindingSummary::of(&report.findings);
        let by_sev: Vec<String> = Severity::ALL
            .iter()
            .rev()
            .filter_map(|v| f.by_severity.get(v).map(|n| format!("{n} {}", v.as_str())))
            .collect();
        let sides: Vec<&str> = report.policy_sides.iter().map(|s| s.as_str()).collect();
        writeln!(
            out,
            "{} policy finding(s) ({}){}",
            f.findings,
            sides.join(" and "),
            if by_sev.is_empty() { String::new() } else { format!(": {}", by_sev.join(", ")) }
        )?;
    }
    Ok(())
}

/// The findings, in a section of their own: by object and side, each with its rule, JSON
/// pointer, container and message.
fn print_findings(report: &ScanReport, color: bool, out: &mut dyn Write) -> Result<()> {
    let title = "Policy findings";
    writeln!(out, "{}", if color { title.bold().to_string() } else { title.to_owned() })?;
    let mut current = None;
    for f in &report.findings {
        let at = (&f.resource, f.side);
        if current != Some(at) {
            let k = &f.resource;
            let ns = k.namespace.as_deref().map(|n| format!("{n}/")).unwrap_or_default();
            writeln!(out, "  {} {}{}  ({})", k.kind, ns, k.name, f.side.as_str())?;
            current = Some(at);
        }
        let sev = format!("{:<8}", f.severity.as_str());
        let container = f.container.as_deref().map(|c| format!("  [{c}]")).unwrap_or_default();
        writeln!(out, "    {} {:<18} {}{}", paint(&sev, f.severity, color), f.rule.as_str(), f.path, container)?;
        writeln!(out, "      {}", f.message)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use drift_core::DriftType;
    use drift_testkit::fixtures::{drift, key, report, t};

    /// `-o json` of a report is the bytes serde_json's pretty writer makes of its document,
    /// whatever the drifts (none, a few, many blocks rendered on several threads), with or
    /// without warnings, a revision and policy findings.
    #[test]
    fn a_reports_json_is_serde_jsons_pretty_document() {
        for n in [0, 1, 3, 1_000] {
            let drifts: Vec<Drift> = (0..n)
                .map(|i| {
                    drift(
                        "Deployment",
                        "shop",
                        &format!("web-{i}"),
                        DriftType::ReplicasDrift,
                        "spec.replicas",
                        i.into(),
                    )
                })
                .collect();
            let mut r = report("s", t(0), &[key("Deployment", "shop", "web-0")], drifts);
            if n == 3 {
                r.warnings.push(SourceWarning::error(drift_core::ErrorKind::InvalidInput, "a \"quoted\" warning"));
                r.revision = None;
                r.policy_sides.push(drift_core::policy::Side::Desired);
            }
            let mut ours = Vec::new();
            write_report(&r, Format::Json, &mut ours).unwrap();
            let mut theirs = Vec::new();
            write_data(&Document::of(&r, &r.drifts), false, &mut theirs).unwrap();
            assert_eq!(String::from_utf8(ours).unwrap(), String::from_utf8(theirs).unwrap(), "{n} drifts");
        }
    }
}
