//! # drift-notify
//!
//! What turns a batch of drift events into one message and sends it: the `notify:`
//! configuration and its routing, the [`Message`] (events grouped by object, a title, counts,
//! bounded in size), its renderings (a signed JSON webhook body, a Slack-compatible message,
//! an email with text and HTML parts, an ntfy or Gotify push, a Discord, Telegram or Teams
//! message, Alertmanager alerts), the transports behind the [`Notifier`] trait, and the
//! pure parts of delivery: [`backoff`] and the [`RateLimiter`].
//!
//! The outbox, the delivery loop (route, claim, send, settle) and `for:`/`reminder:`/digest
//! scheduling live in the stores and in `drift-runtime`; this crate only builds and sends. It
//! depends on `drift-core` only. docs/notifications.md describes the messages and the
//! configuration; docs/notify-webhook.schema.json the webhook body.
//!
//! ```
//! use drift_model::{EventKind, Severity};
//! use drift_notify::{Message, fixtures::{drift, event}};
//!
//! let yaml = "type: webhook\nname: ops\nurl: https://hooks.example.com/drift\nsecret_env: HOOK_SECRET\n";
//! let config: drift_notify::NotifierConfig = serde_saphyr::from_str(yaml).unwrap();
//! let batch = vec![event(EventKind::Opened, drift(1, "shop", "web", Severity::Critical))];
//! let batch: Vec<_> = batch.into_iter().filter(|e| config.takes(e)).collect();
//! let message = Message::new(config.name(), batch, None);
//! let body = serde_json::to_vec(&drift_notify::webhook_body(&message)).unwrap();
//! let header = drift_notify::sign(b"secret", 1_764_576_000, &body);
//! drift_notify::verify(b"secret", &header, &body, 1_764_576_000, std::time::Duration::from_secs(300)).unwrap();
//! // `drift_notify::build(&config)` reads HOOK_SECRET and returns an `Arc<dyn Notifier>`.
//! ```
#![deny(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod alertmanager;
mod backoff;
mod config;
mod discord;
mod email;
pub mod fixtures;
mod http;
mod message;
mod notifier;
mod outlet;
mod push;
mod redact;
mod route;
mod sign;
mod slack;
mod teams;
mod telegram;
pub mod template;
mod text;
mod webhook;

pub use alertmanager::{ALERT_NAME, DRIFT_LABELS, alertmanager_alerts};
pub use backoff::{RateLimiter, backoff, retry_at};
pub use config::{
    AlertmanagerConfig, Backoff, DigestConfig, DiscordConfig, EmailConfig, GotifyConfig, NotifierConfig, NotifierKind,
    NtfyConfig, RateLimit, SecretUrlConfig, SlackConfig, SmtpTls, TeamsConfig, TelegramChat, TelegramConfig,
    WebhookConfig, process_env, validate,
};
pub use discord::{DISCORD_MAX_CONTENT, DISCORD_MAX_EMBED_CHARS, DISCORD_MAX_EMBEDS, discord_body, discord_escape};
pub use email::{EmailContent, EmailNotifier, SMTP_TIMEOUT, email_content, header_text, html_escape};
pub use http::status_is_retryable;
pub use message::{
    Counts, EventView, MAX_DRIFTS_PER_OBJECT, MAX_NAMESPACES_SHOWN, MAX_OBJECTS_SHOWN, MAX_VALUE_CHARS,
    MAX_WEBHOOK_EVENTS, Message, ObjectGroup, ObjectKey, SUMMARY_THRESHOLD, digest_lines, shorten, show_value, verb,
};
pub use notifier::{Notifier, SendError, build, build_with_env};
pub use outlet::{NotifierOutlet, outlet};
pub use push::{GOTIFY_MAX_MESSAGE_CHARS, NTFY_MAX_MESSAGE_BYTES, gotify_body, ntfy_body};
pub use redact::{Secret, redact_http_url};
pub use route::Route;
pub use sign::{
    DELIVERY_HEADER, EVENT_COUNT_HEADER, EVENT_IDS_HEADER, IDEMPOTENCY_HEADER, MAX_EVENT_IDS_HEADER, SIGNATURE_HEADER,
    VerifyError, sign, verify,
};
pub use slack::{SLACK_MAX_TEXT_CHARS, SlackNotifier, slack_body};
pub use teams::{TEAMS_MAX_BYTES, teams_body};
pub use telegram::{TELEGRAM_MAX_TEXT, telegram_body};
pub use text::plain_text;
pub use webhook::{WEBHOOK_BODY_VERSION, WebhookNotifier, webhook_body, webhook_headers};

/// The examples of the crate's README.md, compiled and run as doctests so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
