//! The email notifier against a real SMTP server: scripts/smtp-server.py (aiosmtpd, from the
//! venv of scripts/install-tools.sh) with STARTTLS or implicit TLS on a certificate made here,
//! and AUTH checking a user name and password. The received message is parsed and checked.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use drift_model::{EventKind, Severity};
use drift_notify::fixtures::{drift, event};
use drift_notify::{EmailConfig, Message, NotifierConfig, NotifierKind, SmtpTls, build_with_env};
use mail_parser::MessageParser;
use url::Url;

const PASSWORD: &str = "smtp-test-password";

/// The SMTP server, killed when dropped.
struct SmtpServer {
    child: Child,
    port: u16,
    maildir: PathBuf,
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A self-signed certificate for `localhost` and 127.0.0.1, written to `dir`.
fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.signing_key.serialize_pem()).unwrap();
    (cert_path, key_path)
}

fn start(python: &Path, dir: &Path, tls: &str) -> SmtpServer {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let maildir = dir.join(format!("mail-{tls}"));
    let mut child = Command::new(python)
        .arg(common::repo_root().join("scripts/smtp-server.py"))
        .args(["--cert", cert.to_str().unwrap(), "--key", key.to_str().unwrap()])
        .args(["--maildir", maildir.to_str().unwrap(), "--user", "drift", "--password-env", "SMTP_TEST_PASSWORD"])
        .args(["--tls", tls])
        .env("SMTP_TEST_PASSWORD", PASSWORD)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port = line.strip_prefix("listening ").and_then(|p| p.trim().parse().ok());
    let Some(port) = port else {
        let _ = child.kill();
        panic!("smtp-server.py did not start: {line:?}");
    };
    SmtpServer { child, port, maildir }
}

fn notifier(
    server: &SmtpServer,
    dir: &Path,
    tls: SmtpTls,
    password: &str,
) -> std::sync::Arc<dyn drift_notify::Notifier> {
    notifier_with(server, dir, tls, password, None)
}

fn notifier_with(
    server: &SmtpServer,
    dir: &Path,
    tls: SmtpTls,
    password: &str,
    template: Option<&str>,
) -> std::sync::Arc<dyn drift_notify::Notifier> {
    common::install_crypto_provider();
    let mut config = NotifierConfig::new(NotifierKind::Email(EmailConfig {
        host: "localhost".into(),
        port: Some(server.port),
        tls,
        username_env: "SMTP_USER".into(),
        password_env: "SMTP_PASSWORD".into(),
        from: "Drift <drift@example.com>".into(),
        to: vec!["ops@example.com".into(), "oncall@example.com".into()],
        ca_file: Some(dir.join("cert.pem")),
    }))
    .with_name("mail");
    config.template = template.map(str::to_owned);
    let password = password.to_owned();
    let env = move |name: &str| match name {
        "SMTP_USER" => Some("drift".to_owned()),
        "SMTP_PASSWORD" => Some(password.clone()),
        _ => None,
    };
    drift_notify::validate(std::slice::from_ref(&config), &env).unwrap();
    build_with_env(&config, &env).unwrap()
}

fn critical_message() -> Message {
    let mut d = drift(42, "shop", "web", Severity::Critical);
    d.cluster_value = Some(serde_json::json!("<b>5</b> & more"));
    Message::new("mail", vec![event(EventKind::Opened, d)], Some(Url::parse("https://drift.example.com").unwrap()))
}

fn received(server: &SmtpServer) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(&server.maildir)
        .map(|d| d.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "eml")).collect())
        .unwrap_or_default();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn check_critical_email(raw: &[u8], message: &Message) {
    let mail = MessageParser::default().parse(raw).expect("a parsable email");
    assert_eq!(mail.subject(), Some("[drift] 1 drift opened in prod/shop (1 CRITICAL)"));
    let to: Vec<&str> = mail.to().unwrap().iter().filter_map(|a| a.address()).collect();
    assert_eq!(to, ["ops@example.com", "oncall@example.com"]);
    assert_eq!(mail.from().unwrap().first().unwrap().address(), Some("drift@example.com"));
    assert_eq!(mail.message_id(), Some(format!("{}@drift.notify", message.id()).as_str()));
    let text = mail.body_text(0).unwrap();
    for fact in [
        "Deployment shop/web (cluster prod, repository deploy)",
        "spec.replicas: CRITICAL replicas_drift opened",
        "Git: 3",
        "cluster: <b>5</b> & more",
        "changed by kubectl-edit at 2026-12-01 07:55 UTC",
        "https://drift.example.com/drifts/42",
    ] {
        assert!(text.contains(fact), "{fact:?} missing from the text part:\n{text}");
    }
    let html = mail.body_html(0).unwrap();
    assert!(html.contains("<h1>1 drift opened in prod/shop (1 CRITICAL)</h1>"), "{html}");
    assert!(html.contains("<code>&lt;b&gt;5&lt;/b&gt; &amp; more</code>"), "values are escaped: {html}");
    assert!(!html.contains("<b>5</b>"), "{html}");
    assert!(html.contains("<a href=\"https://drift.example.com/drifts/42\">drift 42</a>"), "{html}");
    assert!(!String::from_utf8_lossy(raw).contains(PASSWORD), "the password is nowhere in the message");
}

#[tokio::test]
async fn a_critical_email_goes_through_starttls_with_authentication() {
    let test = "a_critical_email_goes_through_starttls_with_authentication";
    let Some(python) = common::smtp_python(test) else { return };
    let dir = tempfile::tempdir().unwrap();
    certificate(dir.path());
    let server = start(&python, dir.path(), "starttls");
    let message = critical_message();
    notifier(&server, dir.path(), SmtpTls::Starttls, PASSWORD).send(&message).await.unwrap();
    let mails = received(&server);
    assert_eq!(mails.len(), 1);
    check_critical_email(&mails[0], &message);

    let err = notifier(&server, dir.path(), SmtpTls::Starttls, "wrong-password").send(&message).await.unwrap_err();
    assert!(!err.retryable, "a refused login is not retried: {err}");
    assert!(err.message.contains("535"), "{err}");
    assert!(!err.message.contains("wrong-password"), "{err}");
    assert_eq!(received(&server).len(), 1, "nothing more was received");
}

#[tokio::test]
async fn a_critical_email_goes_through_implicit_tls() {
    let test = "a_critical_email_goes_through_implicit_tls";
    let Some(python) = common::smtp_python(test) else { return };
    let dir = tempfile::tempdir().unwrap();
    certificate(dir.path());
    let server = start(&python, dir.path(), "implicit");
    let message = critical_message();
    notifier(&server, dir.path(), SmtpTls::Implicit, PASSWORD).send(&message).await.unwrap();
    let mails = received(&server);
    assert_eq!(mails.len(), 1);
    check_critical_email(&mails[0], &message);
}

/// The value an attacker writes into the cluster (issue 36): a Slack mention and disguised
/// link, a script, and a header injection.
const HOSTILE: &str =
    "<!channel> <http://evil.example|click> & done <script>alert(1)</script>\r\nBcc: evil@evil.example\r\n\r\nX";

#[tokio::test]
async fn a_hostile_value_arrives_inert() {
    let test = "a_hostile_value_arrives_inert";
    let Some(python) = common::smtp_python(test) else { return };
    let dir = tempfile::tempdir().unwrap();
    certificate(dir.path());
    let server = start(&python, dir.path(), "starttls");
    // In the namespace too, which the subject names.
    let mut d = drift(9, HOSTILE, "web", Severity::High);
    d.cluster_value = Some(serde_json::json!(HOSTILE));
    d.changed_by = Some(HOSTILE.to_owned());
    let message = Message::new("mail", vec![event(EventKind::Opened, d)], None);
    notifier(&server, dir.path(), SmtpTls::Starttls, PASSWORD).send(&message).await.unwrap();
    let mails = received(&server);
    assert_eq!(mails.len(), 1);
    let mail = MessageParser::default().parse(&mails[0]).expect("a parsable email");
    assert!(mail.header("Bcc").is_none(), "the value made no header");
    assert!(mail.bcc().is_none());
    let to: Vec<&str> = mail.to().unwrap().iter().filter_map(|a| a.address()).collect();
    assert_eq!(to, ["ops@example.com", "oncall@example.com"]);
    let subject = mail.subject().unwrap();
    assert!(!subject.contains(['\r', '\n']), "{subject:?}");
    assert!(
        subject.contains("<!channel> <http://evil.example|click> & done"),
        "the subject shows it as text: {subject:?}"
    );
    let html = mail.body_html(0).unwrap();
    assert!(!html.contains("<script>") && !html.contains("<!channel>") && !html.contains("<http://"), "{html}");
    assert!(
        html.contains(
            "&lt;!channel&gt; &lt;http://evil.example|click&gt; &amp; done &lt;script&gt;alert(1)&lt;/script&gt;"
        ),
        "{html}"
    );
    let text = mail.body_text(0).unwrap();
    assert!(text.contains("<!channel> <http://evil.example|click> & done <script>alert(1)</script>"), "{text}");
}

#[tokio::test]
async fn an_untrusted_certificate_is_refused() {
    let test = "an_untrusted_certificate_is_refused";
    let Some(python) = common::smtp_python(test) else { return };
    let dir = tempfile::tempdir().unwrap();
    certificate(dir.path());
    let server = start(&python, dir.path(), "starttls");
    // Trust another certificate than the server's.
    let other = tempfile::tempdir().unwrap();
    certificate(other.path());
    let err = notifier(&server, other.path(), SmtpTls::Starttls, PASSWORD).send(&critical_message()).await.unwrap_err();
    assert!(err.message.contains("invalid peer certificate"), "{err}");
    assert!(err.retryable, "lettre reports a failed handshake as a connection error: retried, then parked: {err}");
    assert!(received(&server).is_empty());
}

#[tokio::test]
async fn a_relay_that_is_down_is_retryable() {
    common::install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    certificate(dir.path());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let config = NotifierConfig::new(NotifierKind::Email(EmailConfig {
        host: "localhost".into(),
        port: Some(port),
        tls: SmtpTls::Starttls,
        username_env: "U".into(),
        password_env: "P".into(),
        from: "drift@example.com".into(),
        to: vec!["ops@example.com".into()],
        ca_file: Some(dir.path().join("cert.pem")),
    }));
    let env = |_: &str| Some("x".to_owned());
    let err = build_with_env(&config, &env).unwrap().send(&critical_message()).await.unwrap_err();
    assert!(err.retryable, "{err}");
}

/// A template makes the HTML part, values HTML-escaped; the text part and the subject stay the
/// built-in ones.
#[tokio::test]
async fn a_template_makes_the_html_part() {
    let test = "a_template_makes_the_html_part";
    let Some(python) = common::smtp_python(test) else { return };
    let dir = tempfile::tempdir().unwrap();
    certificate(dir.path());
    let server = start(&python, dir.path(), "starttls");
    let template = "<p><b>{{ title }}</b></p>{% for o in objects %}{% for d in o.drifts %}<p>{{ d.path }}: {{ d.cluster }}</p>{% endfor %}{% endfor %}";
    let message = critical_message();
    notifier_with(&server, dir.path(), SmtpTls::Starttls, PASSWORD, Some(template)).send(&message).await.unwrap();
    let mails = received(&server);
    assert_eq!(mails.len(), 1);
    let mail = MessageParser::default().parse(&mails[0]).expect("a parsable email");
    assert_eq!(mail.subject(), Some("[drift] 1 drift opened in prod/shop (1 CRITICAL)"));
    let html = mail.body_html(0).unwrap();
    assert!(html.contains("<p>spec.replicas: &lt;b&gt;5&lt;/b&gt; &amp; more</p>"), "{html}");
    assert!(html.starts_with("<p><b>1 drift opened in prod/shop (1 CRITICAL)</b></p>"), "{html}");
    let text = mail.body_text(0).unwrap();
    assert!(text.contains("cluster: <b>5</b> & more") && !text.contains("<p>"), "the built-in text part: {text}");
}
