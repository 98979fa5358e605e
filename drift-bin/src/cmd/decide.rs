//! `drift decide ID acknowledge|accept|reject`: a human decision about a drift, written straight
//! to the configured store (docs/decisions.md).
//!
//! Exit codes: 0 recorded; 1 refused by the store (no such drift, a resolved drift); 2 a usage
//! error (a bad argument, a decision that is not valid: a waiver without a comment, an expiry
//! in the past or more than 366 days away) or a store that cannot be opened.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use chrono::{DateTime, SecondsFormat, Utc};
use clap::Args;
use drift_core::ErrorKind;
use drift_core::act::{Decision, DecisionAction, NewDecision};

use crate::compose;
use crate::config::Config;
use crate::output::{Format, print_data};

/// Arguments of `drift decide`.
#[derive(Debug, Args)]
pub struct DecideArgs {
    /// The drift's id (as `drift drifts list` shows it).
    #[arg(value_parser = clap::value_parser!(i64).range(1..))]
    pub id: i64,
    /// acknowledge (someone is on it: reminders stop), accept (a waiver: the drift is not
    /// counted as open until it expires or its cluster value changes; needs --comment) or
    /// reject (the change must be reverted).
    #[arg(value_parser = parse_action)]
    pub action: DecisionAction,
    /// Why (shown with the drift and in the audit trail; required for accept).
    #[arg(long)]
    pub comment: Option<String>,
    /// When a waiver (accept) ends: a duration from now (7d, 12h, 2w) or an RFC 3339 time. A
    /// waiver lasts 7 days without one, 366 days at most; acknowledge and reject take none.
    #[arg(long, value_parser = parse_time, value_name = "DURATION|TIME")]
    pub expires: Option<TimeArg>,
    /// Who decides (default: $USER, else `cli`).
    #[arg(long = "as", value_name = "NAME")]
    pub actor: Option<String>,
    /// Configuration file.
    #[arg(long, short)]
    pub config: PathBuf,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// A time on the command line: an RFC 3339 time, or a duration from now (`--expires 7d`) or
/// ago (`--since 1h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeArg {
    /// That long from now, or ago.
    Duration(chrono::Duration),
    /// That time.
    At(DateTime<Utc>),
}

impl TimeArg {
    /// The time it names, counting a duration forward from `now`.
    pub fn after(self, now: DateTime<Utc>) -> Result<DateTime<Utc>> {
        match self {
            TimeArg::At(t) => Ok(t),
            TimeArg::Duration(d) => now.checked_add_signed(d).context("the time is too far away"),
        }
    }

    /// The time it names, counting a duration back from `now`.
    pub fn before(self, now: DateTime<Utc>) -> DateTime<Utc> {
        match self {
            TimeArg::At(t) => t,
            TimeArg::Duration(d) => now.checked_sub_signed(d).unwrap_or(DateTime::<Utc>::MIN_UTC),
        }
    }
}

/// `7d`, `12h`, `2w 3d` (humantime), or an RFC 3339 time.
pub fn parse_time(s: &str) -> Result<TimeArg, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(TimeArg::At(t.with_timezone(&Utc)));
    }
    let d = humantime_serde::re::humantime::parse_duration(s).map_err(|_| {
        "expected a duration such as 7d or 12h, or an RFC 3339 time such as 2026-12-08T09:00:00Z".to_owned()
    })?;
    chrono::Duration::from_std(d).map(TimeArg::Duration).map_err(|_| "the duration is too long".to_owned())
}

fn parse_action(s: &str) -> Result<DecisionAction, String> {
    s.parse().map_err(|e: drift_core::Error| e.message().to_owned())
}

/// Who decides: `--as`, else `$USER`, else `cli`.
pub fn actor(given: Option<&str>) -> Result<String> {
    let name = match given {
        Some(n) => n.to_owned(),
        None => std::env::var("USER").ok().filter(|u| !u.trim().is_empty()).unwrap_or_else(|| "cli".to_owned()),
    };
    let name = name.trim().to_owned();
    anyhow::ensure!(
        !name.is_empty() && name.chars().count() <= 64 && !name.chars().any(char::is_control),
        "--as must be a name of 1 to 64 characters"
    );
    Ok(name)
}

/// Runs `drift decide`.
pub async fn run(args: &DecideArgs) -> Result<ExitCode> {
    let now = Utc::now();
    let decision = NewDecision {
        action: args.action,
        comment: args.comment.clone(),
        expires_at: args.expires.map(|e| e.after(now)).transpose()?,
        actor: actor(args.actor.as_deref())?,
    };
    let decision = match decision.validate(now) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {}", e.message());
            return Ok(ExitCode::from(2));
        }
    };
    let config = Config::load(&args.config)?;
    let (_, act) = compose::open_act_store(&config.store_config()?).await?;
    match act.decide(args.id, &decision, now).await {
        Ok(d) => {
            print_decision(&d, args.output)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::InvalidInput) => {
            eprintln!("error: {}", e.message());
            Ok(ExitCode::from(1))
        }
        Err(e) => Err(e.into()),
    }
}

/// An RFC 3339 time to the second, in UTC.
pub fn when(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn print_decision(d: &Decision, format: Format) -> Result<()> {
    print_data(d, format, |d| {
        println!(
            "decision {} on drift {}: {} by {} at {}",
            d.id,
            d.drift_id,
            d.action.as_str(),
            d.actor,
            when(d.decided_at)
        );
        if let Some(c) = &d.comment {
            println!("  comment: {c}");
        }
        if let Some(t) = d.expires_at {
            let what = if d.action == DecisionAction::Accept { "waived until" } else { "until" };
            println!("  {what}: {}", when(t));
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn expiries_are_durations_or_times() {
        let now = Utc.with_ymd_and_hms(2026, 12, 1, 9, 0, 0).unwrap();
        assert_eq!(parse_time("7d").unwrap().after(now).unwrap(), now + chrono::Duration::days(7));
        assert_eq!(parse_time("12h").unwrap().after(now).unwrap(), now + chrono::Duration::hours(12));
        assert_eq!(parse_time("1h").unwrap().before(now), now - chrono::Duration::hours(1));
        let t = parse_time("2026-12-08T10:00:00+01:00").unwrap();
        assert_eq!(t.after(now).unwrap(), Utc.with_ymd_and_hms(2026, 12, 8, 9, 0, 0).unwrap());
        assert_eq!(t.before(now), Utc.with_ymd_and_hms(2026, 12, 8, 9, 0, 0).unwrap());
        for bad in ["soon", "", "7 days later", "2026-12-08"] {
            assert!(parse_time(bad).unwrap_err().contains("7d"), "{bad:?}");
        }
    }

    #[test]
    fn the_actor_is_given_or_the_user() {
        assert_eq!(actor(Some(" alice ")).unwrap(), "alice");
        assert!(actor(Some("")).is_err());
        assert!(actor(Some(&"x".repeat(65))).is_err());
        assert!(!actor(None).unwrap().is_empty());
    }

    #[test]
    fn actions_are_named() {
        assert_eq!(parse_action("accept").unwrap(), DecisionAction::Accept);
        assert_eq!(parse_action("ack").unwrap(), DecisionAction::Acknowledge);
        assert!(parse_action("approve").unwrap_err().contains("acknowledge, accept, reject"));
    }
}
