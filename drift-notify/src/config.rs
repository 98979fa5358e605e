//! Configuration of the notifiers: the entries of `notify:` in drift.yaml, validated without
//! I/O except reading which environment variables exist (never printing their values).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, NaiveTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

use crate::route::Route;

/// One entry of `notify:`.
///
/// ```
/// let yaml = "
/// name: ops
/// type: webhook
/// url: https://hooks.example.com/drift
/// secret_env: DRIFT_WEBHOOK_SECRET
/// for: 2m
/// route:
///   min_severity: HIGH
/// ";
/// let config: drift_notify::NotifierConfig = serde_saphyr::from_str(yaml).unwrap();
/// assert_eq!(config.name(), "ops");
/// assert_eq!(config.for_, std::time::Duration::from_secs(120));
/// assert_eq!(config.retry_for, std::time::Duration::from_secs(24 * 3600));
/// assert_eq!(config.attempts, None);
/// let env = |name: &str| (name == "DRIFT_WEBHOOK_SECRET").then(|| "s3cret".to_owned());
/// drift_notify::validate(&[config], &env).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "serde_json::Map<String, serde_json::Value>")]
pub struct NotifierConfig {
    /// The notifier's name, in the outbox, the audit trail and metrics (default: its type;
    /// names must be unique).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Where and how messages go.
    #[serde(flatten)]
    pub kind: NotifierKind,
    /// Which events this notifier takes.
    #[serde(default)]
    pub route: Route,
    /// Send `opened` only when the drift is still open this long after it opened (YAML key
    /// `for`, default `0s`: at once).
    #[serde(rename = "for", default, with = "humantime_serde")]
    pub for_: Duration,
    /// Re-notify drifts still open and not acknowledged this long after they were last told.
    #[serde(default, with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub reminder: Option<Duration>,
    /// A daily summary of the open drifts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<DigestConfig>,
    /// At most this many messages per period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// How long a delivery whose attempts fail with failures that may pass is retried, from
    /// its first failure, before it is parked as an outage (default `24h`).
    #[serde(default = "default_retry_for", with = "humantime_serde")]
    pub retry_for: Duration,
    /// At most this many attempts before a delivery is parked as an outage, whichever of this
    /// and `retry_for` comes first (default: no limit, only `retry_for`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// Delays between attempts; `max` is also how often a delivery parked by an outage is probed.
    #[serde(default)]
    pub backoff: Backoff,
    /// A MiniJinja template for the message's text, rendered sandboxed with values escaped for
    /// the target's markup ([`crate::template`]); none: the built-in message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
}

fn default_retry_for() -> Duration {
    Duration::from_secs(24 * 3600)
}

/// The fields every notifier has. serde's `flatten` cannot refuse unknown keys, so an entry is
/// read as a map, split into these keys and the keys of its `type`, and each part is read
/// with `deny_unknown_fields`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Common {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    route: Route,
    #[serde(rename = "for", default, with = "humantime_serde")]
    for_: Duration,
    #[serde(default, with = "humantime_serde")]
    reminder: Option<Duration>,
    #[serde(default)]
    digest: Option<DigestConfig>,
    #[serde(default)]
    rate_limit: Option<RateLimit>,
    #[serde(default = "default_retry_for", with = "humantime_serde")]
    retry_for: Duration,
    #[serde(default)]
    attempts: Option<u32>,
    #[serde(default)]
    backoff: Backoff,
    #[serde(default)]
    template: Option<String>,
}

const COMMON_KEYS: [&str; 10] =
    ["name", "route", "for", "reminder", "digest", "rate_limit", "retry_for", "attempts", "backoff", "template"];

impl TryFrom<serde_json::Map<String, serde_json::Value>> for NotifierConfig {
    type Error = String;

    fn try_from(mut map: serde_json::Map<String, serde_json::Value>) -> Result<Self, String> {
        let common: serde_json::Map<String, serde_json::Value> =
            COMMON_KEYS.iter().filter_map(|k| map.remove(*k).map(|v| ((*k).to_owned(), v))).collect();
        let kind: NotifierKind = serde_json::from_value(serde_json::Value::Object(map)).map_err(|e| e.to_string())?;
        let c: Common = serde_json::from_value(serde_json::Value::Object(common)).map_err(|e| e.to_string())?;
        Ok(NotifierConfig {
            name: c.name,
            kind,
            route: c.route,
            for_: c.for_,
            reminder: c.reminder,
            digest: c.digest,
            rate_limit: c.rate_limit,
            retry_for: c.retry_for,
            attempts: c.attempts,
            backoff: c.backoff,
            template: c.template,
        })
    }
}

/// The transport of a notifier, chosen by `type:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum NotifierKind {
    /// A signed JSON POST (docs/notify-webhook.schema.json).
    Webhook(WebhookConfig),
    /// A Slack-compatible incoming webhook (Slack, Mattermost, ...).
    Slack(SlackConfig),
    /// An email through an SMTP relay.
    Email(EmailConfig),
    /// An ntfy topic (ntfy.sh or a server of one's own), published as JSON.
    Ntfy(NtfyConfig),
    /// A Gotify application (`POST /message` with its token in `X-Gotify-Key`).
    Gotify(GotifyConfig),
    /// A Discord channel webhook (`content` and `embeds`).
    Discord(DiscordConfig),
    /// A Telegram chat through a bot (Bot API `sendMessage`, HTML).
    Telegram(TelegramConfig),
    /// A Microsoft Teams channel through a Workflows (or legacy incoming) webhook: an Adaptive
    /// Card in a message attachment.
    Teams(TeamsConfig),
    /// Alertmanager's v2 API: one alert per drift, resolved when the drift resolves.
    Alertmanager(AlertmanagerConfig),
}

impl NotifierKind {
    /// `webhook`, `slack`, `email`, `ntfy`, `gotify`, `discord`, `telegram`, `teams` or
    /// `alertmanager`.
    pub fn type_name(&self) -> &'static str {
        match self {
            NotifierKind::Webhook(_) => "webhook",
            NotifierKind::Slack(_) => "slack",
            NotifierKind::Email(_) => "email",
            NotifierKind::Ntfy(_) => "ntfy",
            NotifierKind::Gotify(_) => "gotify",
            NotifierKind::Discord(_) => "discord",
            NotifierKind::Telegram(_) => "telegram",
            NotifierKind::Teams(_) => "teams",
            NotifierKind::Alertmanager(_) => "alertmanager",
        }
    }
}

/// A URL that is itself a credential (a Discord or Teams webhook): from `url_env`
/// (preferred) or `url`, exactly one of them. `Debug` shows the URL's scheme and host only.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretUrlConfig {
    /// The environment variable holding the URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_env: Option<String>,
    /// The URL written in the configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl std::fmt::Debug for SecretUrlConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretUrlConfig")
            .field("url_env", &self.url_env)
            .field("url", &self.url.as_deref().map(crate::redact::redact_http_url))
            .finish()
    }
}

/// `type: discord`: a channel webhook URL (`https://discord.com/api/webhooks/ID/TOKEN`, a
/// credential) and the name the messages are posted under.
pub type DiscordConfig = SecretUrlConfig;

/// `type: teams`: a Teams Workflows webhook URL ("Send webhook alerts to a channel"), or a
/// legacy incoming-webhook URL; a credential.
pub type TeamsConfig = SecretUrlConfig;

/// `type: ntfy`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NtfyConfig {
    /// The ntfy server (default `https://ntfy.sh`); messages are published as JSON to its root.
    #[serde(default = "default_ntfy_url")]
    pub url: String,
    /// The topic. On a public server without access control the topic is the password:
    /// `Debug` does not show it.
    pub topic: String,
    /// The environment variable holding an access token (`tk_...`), sent as
    /// `Authorization: Bearer`; none for an open topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
}

fn default_ntfy_url() -> String {
    "https://ntfy.sh".to_owned()
}

impl std::fmt::Debug for NtfyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NtfyConfig")
            .field("url", &crate::redact::redact_http_url(&self.url))
            .field("topic", &"***")
            .field("token_env", &self.token_env)
            .finish()
    }
}

/// `type: gotify`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GotifyConfig {
    /// The Gotify server (messages go to `{url}/message`).
    pub url: String,
    /// The environment variable holding the application token, sent as `X-Gotify-Key`.
    pub token_env: String,
}

impl std::fmt::Debug for GotifyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GotifyConfig")
            .field("url", &crate::redact::redact_http_url(&self.url))
            .field("token_env", &self.token_env)
            .finish()
    }
}

/// A Telegram chat: its numeric id (`-1001234567890` for a group or channel) or `@channelname`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TelegramChat {
    /// A numeric chat id.
    Id(i64),
    /// `@channelname` (or a numeric id written as a string).
    Name(String),
}

/// `type: telegram`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelegramConfig {
    /// The environment variable holding the bot token (from @BotFather). The token is part of
    /// the Bot API's URL path; it never appears in a log, an error or a `Debug` output.
    pub bot_token_env: String,
    /// The chat the bot writes to.
    pub chat_id: TelegramChat,
    /// The topic of a forum supergroup, when the messages go to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_thread_id: Option<i64>,
    /// The Bot API server (default `https://api.telegram.org`; a local Bot API server, tests).
    #[serde(default = "default_telegram_api")]
    pub api_url: String,
}

fn default_telegram_api() -> String {
    "https://api.telegram.org".to_owned()
}

/// `type: alertmanager`.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertmanagerConfig {
    /// Alertmanager's address, `http://alertmanager:9093` (alerts go to `{url}/api/v2/alerts`).
    pub url: String,
    /// The environment variable holding a bearer token (a proxy in front of Alertmanager);
    /// none by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// How long a firing alert lasts after it was last posted (its `endsAt`), unless the drift
    /// resolves first (default `24h`). Reminders post it again: keep `reminder:` shorter.
    #[serde(default = "default_ends_after", with = "humantime_serde")]
    pub ends_after: Duration,
    /// Labels added to every alert (`team: platform`), next to the drift's own.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
}

fn default_ends_after() -> Duration {
    Duration::from_secs(24 * 3600)
}

impl std::fmt::Debug for AlertmanagerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlertmanagerConfig")
            .field("url", &crate::redact::redact_http_url(&self.url))
            .field("token_env", &self.token_env)
            .field("ends_after", &self.ends_after)
            .field("labels", &self.labels)
            .finish()
    }
}

/// `type: webhook`. `Debug` shows the URL's scheme and host only (a query may hold a token).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// Where to POST (http or https).
    pub url: String,
    /// The environment variable holding the HMAC-SHA256 secret of `X-Drift-Signature`.
    pub secret_env: String,
}

/// `type: slack`: the incoming-webhook URL, itself a secret, from `url_env` (preferred) or
/// `url`; exactly one of them.
/// `Debug` shows the URL's scheme and host only.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlackConfig {
    /// The environment variable holding the incoming-webhook URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_env: Option<String>,
    /// The incoming-webhook URL written in the configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookConfig")
            .field("url", &crate::redact::redact_http_url(&self.url))
            .field("secret_env", &self.secret_env)
            .finish()
    }
}

impl std::fmt::Debug for SlackConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackConfig")
            .field("url_env", &self.url_env)
            .field("url", &self.url.as_deref().map(crate::redact::redact_http_url))
            .finish()
    }
}

/// How the SMTP connection is encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SmtpTls {
    /// Plain connection upgraded with STARTTLS, which is required (usually port 587).
    Starttls,
    /// TLS from the first byte (SMTPS, usually port 465).
    Implicit,
}

/// `type: email`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmailConfig {
    /// The SMTP relay's host name (also the name its certificate must carry).
    pub host: String,
    /// Its port (default 587 for `starttls`, 465 for `implicit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// `starttls` (default) or `implicit`. There is no clear-text mode.
    #[serde(default = "default_tls")]
    pub tls: SmtpTls,
    /// The environment variable holding the SMTP user name.
    pub username_env: String,
    /// The environment variable holding the SMTP password.
    pub password_env: String,
    /// The sender, `drift@example.com` or `Drift <drift@example.com>`.
    pub from: String,
    /// The recipients (at least one).
    pub to: Vec<String>,
    /// A PEM file of extra root certificates to trust (a private relay, tests), next to the
    /// system's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
}

fn default_tls() -> SmtpTls {
    SmtpTls::Starttls
}

impl EmailConfig {
    /// The port, or the default of the TLS mode.
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(match self.tls {
            SmtpTls::Starttls => 587,
            SmtpTls::Implicit => 465,
        })
    }
}

/// `digest:`: a daily summary at a local time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DigestConfig {
    /// Local time of day, `HH:MM` (24-hour).
    pub at: String,
    /// IANA time zone (default `UTC`), for example `Europe/Paris`.
    #[serde(default = "default_timezone")]
    pub timezone: String,
}

fn default_timezone() -> String {
    "UTC".to_owned()
}

impl DigestConfig {
    /// The time of day and the zone; an error names what does not parse.
    pub fn parse(&self) -> Result<(NaiveTime, chrono_tz::Tz), String> {
        let time = NaiveTime::parse_from_str(&self.at, "%H:%M")
            .map_err(|e| format!("{:?} is not a time of day HH:MM: {e}", self.at))?;
        let tz = self
            .timezone
            .parse::<chrono_tz::Tz>()
            .map_err(|_| format!("{:?} is not an IANA time zone (for example Europe/Paris)", self.timezone))?;
        Ok((time, tz))
    }

    /// The first digest time strictly after `now`. On a day when the local time does not exist
    /// (a daylight-saving gap) the digest goes out an hour later; when it exists twice, at the
    /// first. `None` when the configuration does not parse.
    pub fn next_after(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let (time, tz) = self.parse().ok()?;
        let today = now.with_timezone(&tz).date_naive();
        (0..=2)
            .filter_map(|d| today.checked_add_days(chrono::Days::new(d)))
            .find_map(|day| Self::at_on(day, time, tz).filter(|at| *at > now))
    }

    /// The local day (in the digest's zone) whose digest is due at `now`: today, once its time
    /// has come. `None` before it, or when the configuration does not parse.
    pub fn due_day(&self, now: DateTime<Utc>) -> Option<chrono::NaiveDate> {
        let (time, tz) = self.parse().ok()?;
        let today = now.with_timezone(&tz).date_naive();
        Self::at_on(today, time, tz).filter(|at| *at <= now).map(|_| today)
    }

    /// The digest time of a local day, in UTC (a time in a daylight-saving gap an hour later;
    /// a time that exists twice, the first).
    fn at_on(day: chrono::NaiveDate, time: NaiveTime, tz: chrono_tz::Tz) -> Option<DateTime<Utc>> {
        let local = day.and_time(time);
        Some(
            tz.from_local_datetime(&local)
                .earliest()
                .or_else(|| tz.from_local_datetime(&(local + chrono::Duration::hours(1))).earliest())?
                .with_timezone(&Utc),
        )
    }
}

/// `rate_limit:`: at most `messages` messages per `per`, as a token bucket (bursts up to
/// `messages`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Messages per period (at least 1).
    pub messages: u32,
    /// The period.
    #[serde(with = "humantime_serde")]
    pub per: Duration,
}

/// `backoff:`: exponential delays between attempts, with jitter ([`crate::backoff`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backoff {
    /// Delay after the first failure (default `2s`).
    #[serde(default = "default_initial", with = "humantime_serde")]
    pub initial: Duration,
    /// Longest delay (default `10m`).
    #[serde(default = "default_max", with = "humantime_serde")]
    pub max: Duration,
}

fn default_initial() -> Duration {
    Duration::from_secs(2)
}
fn default_max() -> Duration {
    Duration::from_secs(600)
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { initial: default_initial(), max: default_max() }
    }
}

impl NotifierConfig {
    /// A notifier of this kind with every default.
    pub fn new(kind: NotifierKind) -> Self {
        NotifierConfig {
            name: None,
            kind,
            route: Route::default(),
            for_: Duration::ZERO,
            reminder: None,
            digest: None,
            rate_limit: None,
            retry_for: default_retry_for(),
            attempts: None,
            backoff: Backoff::default(),
            template: None,
        }
    }

    /// Sets the name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The name, or the type when none is set.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(self.kind.type_name())
    }

    /// Whether this notifier takes `event`: an event addressed to a notifier (reminders,
    /// digests) only by that one, and otherwise what [`Route::takes`] says.
    pub fn takes(&self, event: &drift_model::DriftEvent) -> bool {
        event.notifier.as_deref().is_none_or(|n| n == self.name()) && self.route.takes(event)
    }

    /// The problems of this entry (the `index`-th of `notify:`), each naming its field, like
    /// `notify[1].url: ...`. `env` says whether an environment variable is set (its value is
    /// only checked for being non-empty, never shown).
    pub fn problems(&self, index: usize, env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
        let mut out = Vec::new();
        let mut bad = |field: &str, why: String| out.push(format!("notify[{index}].{field}: {why}"));
        if let Some(name) = &self.name
            && (name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)))
        {
            bad("name", format!("{name:?} must be non-empty letters, digits, '-', '_' or '.'"));
        }
        let need_env = |field: &str, var: &str, bad: &mut dyn FnMut(&str, String)| {
            if var.is_empty() {
                bad(field, "names no environment variable".into());
            } else if env(var).is_none_or(|v| v.is_empty()) {
                bad(field, format!("the environment variable {var} is not set or empty"));
            }
        };
        match &self.kind {
            NotifierKind::Webhook(w) => {
                if let Err(e) = crate::redact::parse_http_url(&w.url) {
                    bad("url", e);
                }
                need_env("secret_env", &w.secret_env, &mut bad);
            }
            NotifierKind::Slack(s) => secret_url(&s.url_env, &s.url, env, &mut bad),
            NotifierKind::Discord(s) | NotifierKind::Teams(s) => secret_url(&s.url_env, &s.url, env, &mut bad),
            NotifierKind::Ntfy(n) => {
                if let Err(e) = crate::redact::parse_http_url(&n.url) {
                    bad("url", e);
                }
                if n.topic.is_empty()
                    || n.topic.len() > 64
                    || !n.topic.chars().all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
                {
                    bad("topic", "must be 1 to 64 letters, digits, '-' or '_' (ntfy's topic names)".into());
                }
                if let Some(var) = &n.token_env {
                    need_env("token_env", var, &mut bad);
                }
            }
            NotifierKind::Gotify(g) => {
                if let Err(e) = crate::redact::parse_http_url(&g.url) {
                    bad("url", e);
                }
                need_env("token_env", &g.token_env, &mut bad);
            }
            NotifierKind::Telegram(t) => {
                if let Err(e) = crate::redact::parse_http_url(&t.api_url) {
                    bad("api_url", e);
                }
                need_env("bot_token_env", &t.bot_token_env, &mut bad);
                if let TelegramChat::Name(name) = &t.chat_id
                    && !(name.starts_with('@') && name.len() > 1 || name.parse::<i64>().is_ok())
                {
                    bad("chat_id", format!("{name:?} is neither a chat id nor @channelname"));
                }
            }
            NotifierKind::Alertmanager(a) => {
                if let Err(e) = crate::redact::parse_http_url(&a.url) {
                    bad("url", e);
                }
                if let Some(var) = &a.token_env {
                    need_env("token_env", var, &mut bad);
                }
                if a.ends_after < Duration::from_secs(60) {
                    bad("ends_after", "must be at least 1m".into());
                }
                if self.reminder.is_some_and(|r| r >= a.ends_after) {
                    bad(
                        "reminder",
                        "must be shorter than ends_after, or a firing alert ends before it is posted again".into(),
                    );
                }
                for name in a.labels.keys() {
                    if !crate::alertmanager::is_label_name(name)
                        || crate::alertmanager::DRIFT_LABELS.contains(&name.as_str())
                    {
                        bad(&format!("labels.{name}"), "must be a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*) other than the drift's own labels".into());
                    }
                }
            }
            NotifierKind::Email(e) => {
                if e.host.is_empty() || e.host.contains(['/', ' ', ':']) {
                    bad("host", format!("{:?} is not a host name", e.host));
                }
                if e.port == Some(0) {
                    bad("port", "must be between 1 and 65535".into());
                }
                need_env("username_env", &e.username_env, &mut bad);
                need_env("password_env", &e.password_env, &mut bad);
                if let Err(why) = e.from.parse::<lettre::message::Mailbox>() {
                    bad("from", format!("{:?} is not an address: {why}", e.from));
                }
                if e.to.is_empty() {
                    bad("to", "needs at least one recipient".into());
                }
                for (i, to) in e.to.iter().enumerate() {
                    if let Err(why) = to.parse::<lettre::message::Mailbox>() {
                        bad(&format!("to[{i}]"), format!("{to:?} is not an address: {why}"));
                    }
                }
                if e.ca_file.as_ref().is_some_and(|ca| ca.as_os_str().is_empty()) {
                    bad("ca_file", "is empty".into());
                }
            }
        }
        if let Some(source) = &self.template {
            if matches!(self.kind, NotifierKind::Webhook(_)) {
                bad(
                    "template",
                    "the webhook sends its documented JSON document; templates are for the messages people read".into(),
                );
            } else if let Err(e) = crate::template::check(source) {
                bad("template", e);
            } else if matches!(self.kind, NotifierKind::Telegram(_))
                && let Some(why) = crate::template::sample(source, crate::template::Markup::Html)
                    .and_then(|out| crate::telegram::html_problem(&out))
            {
                bad("template", format!("Telegram would refuse its HTML: {why}"));
            }
        }
        if let Some(Err(e)) = self.digest.as_ref().map(DigestConfig::parse) {
            bad("digest", e);
        }
        if let Some(r) = &self.rate_limit {
            if r.messages == 0 {
                bad("rate_limit.messages", "must be at least 1".into());
            }
            if r.per.is_zero() {
                bad("rate_limit.per", "must be longer than 0s".into());
            }
        }
        if self.reminder.is_some_and(|r| r < Duration::from_secs(60)) {
            bad("reminder", "must be at least 1m".into());
        }
        if self.attempts == Some(0) {
            bad("attempts", "must be at least 1".into());
        }
        if self.retry_for.is_zero() {
            bad("retry_for", "must be longer than 0s".into());
        }
        if self.backoff.initial.is_zero() {
            bad("backoff.initial", "must be longer than 0s".into());
        }
        if self.backoff.max < self.backoff.initial {
            bad("backoff.max", "must not be shorter than backoff.initial".into());
        }
        out
    }
}

/// The problems of a URL that is a secret: exactly one of `url_env` and `url`, an http(s)
/// URL; the value of the variable is never shown.
fn secret_url(
    url_env: &Option<String>,
    url: &Option<String>,
    env: &dyn Fn(&str) -> Option<String>,
    bad: &mut dyn FnMut(&str, String),
) {
    match (url_env, url) {
        (Some(var), None) => match env(var).filter(|v| !v.is_empty()) {
            _ if var.is_empty() => bad("url_env", "names no environment variable".into()),
            None => bad("url_env", format!("the environment variable {var} is not set or empty")),
            Some(v) => {
                if let Err(e) = crate::redact::parse_http_url(&v) {
                    bad("url_env", format!("the value of {var}: {e}"));
                }
            }
        },
        (None, Some(url)) => {
            if let Err(e) = crate::redact::parse_http_url(url) {
                bad("url", e);
            }
        }
        _ => bad("url_env", "set exactly one of url_env (preferred: the URL is a secret) and url".into()),
    }
}

/// Validates every entry of `notify:` and that names are unique; the error lists every
/// problem, one a line, each naming its field. `env` looks up environment variables (use
/// [`process_env`] at start-up); their values never appear in the error.
pub fn validate(configs: &[NotifierConfig], env: &dyn Fn(&str) -> Option<String>) -> drift_model::Result<()> {
    let mut problems = Vec::new();
    let mut names = BTreeSet::new();
    for (i, c) in configs.iter().enumerate() {
        problems.extend(c.problems(i, env));
        if !names.insert(c.name()) {
            problems.push(format!(
                "notify[{i}].name: {:?} is used by another notifier (names default to the type; set name:)",
                c.name()
            ));
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(drift_model::Error::config(problems.join("\n"))) }
}

/// Looks an environment variable up in this process (`None` when unset or not UTF-8).
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "SECRET" => Some("very-secret-value".into()),
            "SLACK_URL" => Some("https://hooks.slack.com/services/T000/B000/XXXX".into()),
            "BAD_URL" => Some("not a url with-secret-part".into()),
            "USER" | "PASS" => Some("x".into()),
            _ => None,
        }
    }

    fn parse(yaml: &str) -> Vec<NotifierConfig> {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn every_field_parses_with_human_durations() {
        let c = parse(
            "
- name: mail
  type: email
  host: smtp-relay.brevo.com
  tls: implicit
  username_env: USER
  password_env: PASS
  from: Drift <drift@example.com>
  to: [ops@example.com]
  ca_file: /etc/drift/ca.pem
  route:
    min_severity: CRITICAL
    drift_types: [image_tag_drift]
    namespaces: [shop]
    repositories: [deploy]
    clusters: [prod]
    classifications: [manual_change]
    events: [opened, resolved]
  for: 90s
  reminder: 4h
  digest: { at: '09:00', timezone: Europe/Paris }
  rate_limit: { messages: 10, per: 5m }
  retry_for: 3d
  attempts: 3
  backoff: { initial: 1s, max: 7d }
",
        );
        let c = &c[0];
        assert_eq!(c.name(), "mail");
        assert_eq!(c.for_, Duration::from_secs(90));
        assert_eq!(c.reminder, Some(Duration::from_secs(4 * 3600)));
        assert_eq!(c.rate_limit, Some(RateLimit { messages: 10, per: Duration::from_secs(300) }));
        assert_eq!(c.backoff.max, Duration::from_secs(7 * 86400));
        assert_eq!((c.retry_for, c.attempts), (Duration::from_secs(3 * 86400), Some(3)));
        let NotifierKind::Email(e) = &c.kind else { panic!("email") };
        assert_eq!((e.tls, e.port()), (SmtpTls::Implicit, 465));
        assert_eq!(c.route.events.len(), 2);
        validate(std::slice::from_ref(c), &env).unwrap();
    }

    #[test]
    fn defaults_are_documented_ones() {
        let c = &parse("- type: slack\n  url_env: SLACK_URL\n")[0];
        assert_eq!(c.name(), "slack");
        assert_eq!((c.for_, c.attempts, c.backoff), (Duration::ZERO, None, Backoff::default()));
        assert_eq!(c.retry_for, Duration::from_secs(24 * 3600));
        assert_eq!(c.backoff.initial, Duration::from_secs(2));
        assert_eq!(c.backoff.max, Duration::from_secs(600));
        assert_eq!(c.route.events, drift_model::EventKind::ALL.to_vec());
        validate(std::slice::from_ref(c), &env).unwrap();
    }

    #[test]
    fn unknown_keys_and_types_are_refused() {
        assert!(serde_saphyr::from_str::<Vec<NotifierConfig>>("- type: pager\n  url: x\n").is_err());
        assert!(
            serde_saphyr::from_str::<Vec<NotifierConfig>>(
                "- type: webhook\n  url: x\n  secret_env: S\n  colour: red\n"
            )
            .is_err()
        );
        assert!(
            serde_saphyr::from_str::<Vec<NotifierConfig>>(
                "- type: webhook\n  url: x\n  secret_env: S\n  route: { severity: HIGH }\n"
            )
            .is_err()
        );
    }

    #[test]
    fn problems_name_their_field_and_never_an_env_value() {
        let c = parse(
            "
- type: webhook
  url: ftp://example.com/x
  secret_env: MISSING
- type: webhook
  url: https://example.com/hook
  secret_env: SECRET
- type: slack
  url_env: BAD_URL
- type: email
  host: smtp.example.com
  port: 0
  username_env: USER
  password_env: NOPE
  from: not an address
  to: []
  digest: { at: '25:00', timezone: Mars/Olympus }
  rate_limit: { messages: 0, per: 0s }
  attempts: 0
  retry_for: 0s
  backoff: { initial: 1m, max: 1s }
",
        );
        let err = validate(&c, &env).unwrap_err().to_string();
        for needle in [
            "notify[0].url: ",
            "notify[0].secret_env: the environment variable MISSING is not set",
            "notify[1].name: \"webhook\" is used by another notifier",
            "notify[2].url_env: the value of BAD_URL",
            "notify[3].port",
            "notify[3].password_env: the environment variable NOPE",
            "notify[3].from",
            "notify[3].to: needs at least one",
            "notify[3].digest",
            "notify[3].rate_limit.messages",
            "notify[3].rate_limit.per",
            "notify[3].attempts",
            "notify[3].retry_for",
            "notify[3].backoff.max",
        ] {
            assert!(err.contains(needle), "{needle:?} missing from:\n{err}");
        }
        for value in ["very-secret-value", "with-secret-part"] {
            assert!(!err.contains(value), "an environment value leaked:\n{err}");
        }
        let both = parse("- type: slack\n  url_env: SLACK_URL\n  url: https://x.example\n");
        assert!(validate(&both, &env).unwrap_err().to_string().contains("notify[0].url_env: set exactly one"));
    }

    #[test]
    fn debug_output_hides_url_paths_and_queries() {
        let c = parse(
            "
- type: webhook
  url: https://hooks.example.com/in/abc?token=t0ken
  secret_env: SECRET
- type: slack
  url: https://hooks.slack.com/services/T0/B0/s3cret-path
",
        );
        let debug = format!("{c:?}");
        for secret in ["t0ken", "s3cret-path", "/in/abc", "/services/"] {
            assert!(!debug.contains(secret), "{secret} in {debug}");
        }
        assert!(debug.contains("https://hooks.slack.com"), "{debug}");
    }

    #[test]
    fn the_next_digest_follows_the_local_clock_across_daylight_saving() {
        let d = DigestConfig { at: "09:00".into(), timezone: "Europe/Paris".into() };
        let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        // Winter: Paris is UTC+1.
        assert_eq!(d.next_after(at("2026-12-01T07:59:00Z")), Some(at("2026-12-01T08:00:00Z")));
        assert_eq!(d.next_after(at("2026-12-01T08:00:00Z")), Some(at("2026-12-02T08:00:00Z")));
        // Summer: UTC+2.
        assert_eq!(d.next_after(at("2026-07-01T12:00:00Z")), Some(at("2026-07-02T07:00:00Z")));
        // 02:30 does not exist in Paris on 2026-03-29: an hour later.
        let gap = DigestConfig { at: "02:30".into(), timezone: "Europe/Paris".into() };
        assert_eq!(gap.next_after(at("2026-03-28T23:00:00Z")), Some(at("2026-03-29T01:30:00Z")));
        assert_eq!(
            DigestConfig { at: "9h".into(), timezone: "UTC".into() }.next_after(at("2026-12-01T00:00:00Z")),
            None
        );
    }
}
