//! The [`Notifier`] trait, its error, and [`build`], the one place that knows every transport.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use crate::config::{NotifierConfig, NotifierKind};
use crate::email::EmailNotifier;
use crate::http::JsonNotifier;
use crate::message::Message;
use crate::redact::Secret;
use crate::slack::SlackNotifier;
use crate::webhook::WebhookNotifier;

/// Sends messages somewhere.
///
/// Contract:
/// - `send` sends one message once and says whether the receiver took it; it never retries
///   by itself (the delivery loop retries with [`crate::retry_at`] and parks after
///   `retry_for`, probing afterwards), so a receiver may see a message again and must drop repeated message ids;
/// - an error says whether another attempt could succeed ([`SendError::retryable`]);
/// - nothing secret (a secret, a password, a Slack webhook URL's path) is ever in an error,
///   a log line or a `Debug` output.
#[async_trait]
pub trait Notifier: Send + Sync + fmt::Debug {
    /// The notifier's name.
    fn name(&self) -> &str;
    /// Its configuration.
    fn config(&self) -> &NotifierConfig;
    /// Sends one message.
    async fn send(&self, message: &Message) -> Result<(), SendError>;
}

/// Why a message was not taken: [`drift_model::act::SendFailure`], which the delivery loop
/// reads (retryable: connection errors, a failed TLS handshake included, since lettre reports
/// it as one; timeouts; HTTP 5xx, 408 and 429; SMTP 4xx. Not: HTTP 3xx and other 4xx, SMTP 5xx
/// such as a refused login or recipient, a relay without STARTTLS or AUTH, a message that
/// cannot be built. Retryable failures are parked as an outage after `retry_for`, then probed).
pub use drift_model::act::SendFailure as SendError;

/// `Authorization: Bearer <token>` on every request of `notifier`, the token hidden from errors.
fn bearer(notifier: JsonNotifier, token: Secret) -> JsonNotifier {
    notifier.with_auth("Authorization", Secret::new(format!("Bearer {}", token.expose())), &token)
}

/// A notifier for `config`, reading its secrets from this process's environment.
pub fn build(config: &NotifierConfig) -> drift_model::Result<Arc<dyn Notifier>> {
    build_with_env(config, &crate::config::process_env)
}

/// A notifier for `config`, reading its secrets through `env` (tests pass a map). A missing
/// variable is a configuration error naming it, never showing a value.
pub fn build_with_env(
    config: &NotifierConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> drift_model::Result<Arc<dyn Notifier>> {
    let name = config.name();
    let secret_url = |url_env: &Option<String>, url: &Option<String>| -> drift_model::Result<Secret> {
        match (url_env, url) {
            (Some(var), None) => env(var).filter(|v| !v.is_empty()).map(Secret::new).ok_or_else(|| {
                drift_model::Error::config(format!(
                    "notifier {name}: the environment variable {var} is not set or empty"
                ))
            }),
            (None, Some(url)) => Ok(Secret::new(url.clone())),
            _ => Err(drift_model::Error::config(format!("notifier {name}: set exactly one of url_env and url"))),
        }
    };
    let secret = |var: &str| -> drift_model::Result<Secret> {
        env(var).filter(|v| !v.is_empty()).map(Secret::new).ok_or_else(|| {
            drift_model::Error::config(format!("notifier {name}: the environment variable {var} is not set or empty"))
        })
    };
    Ok(match &config.kind {
        NotifierKind::Webhook(w) => Arc::new(WebhookNotifier::new(config.clone(), w, secret(&w.secret_env)?)?),
        NotifierKind::Slack(s) => Arc::new(SlackNotifier::new(config.clone(), &secret_url(&s.url_env, &s.url)?)?),
        NotifierKind::Discord(s) => Arc::new(JsonNotifier::new(
            config.clone(),
            secret_url(&s.url_env, &s.url)?.expose(),
            crate::discord::render,
        )?),
        NotifierKind::Teams(s) => {
            Arc::new(JsonNotifier::new(config.clone(), secret_url(&s.url_env, &s.url)?.expose(), crate::teams::render)?)
        }
        NotifierKind::Ntfy(n) => {
            let notifier = JsonNotifier::new(config.clone(), &n.url, crate::push::render_ntfy)?;
            Arc::new(match &n.token_env {
                Some(var) => bearer(notifier, secret(var)?),
                None => notifier,
            })
        }
        NotifierKind::Gotify(g) => {
            let token = secret(&g.token_env)?;
            let url = crate::push::join(&g.url, "message");
            Arc::new(JsonNotifier::new(config.clone(), &url, crate::push::render_gotify)?.with_auth(
                "X-Gotify-Key",
                token.clone(),
                &token,
            ))
        }
        NotifierKind::Telegram(t) => {
            let token = secret(&t.bot_token_env)?;
            let url = crate::telegram::send_message_url(&t.api_url, token.expose());
            let mut notifier = JsonNotifier::new(config.clone(), &url, crate::telegram::render)?;
            notifier.poster = notifier.poster.hiding(&token);
            Arc::new(notifier)
        }
        NotifierKind::Alertmanager(a) => {
            let notifier = JsonNotifier::new(
                config.clone(),
                &crate::alertmanager::alerts_url(&a.url),
                crate::alertmanager::render,
            )?;
            Arc::new(match &a.token_env {
                Some(var) => bearer(notifier, secret(var)?),
                None => notifier,
            })
        }
        NotifierKind::Email(e) => {
            Arc::new(EmailNotifier::new(config.clone(), e, secret(&e.username_env)?, secret(&e.password_env)?)?)
        }
    })
}
