//! docs/notifications.md stays true: its `notify:` example parses and validates, and its
//! Python receiver accepts a real signature and refuses a tampered body.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use drift_model::{EventKind, Severity};
use drift_notify::fixtures::{drift, event};

/// The first fenced block of `lang` that holds `holding`.
fn fenced_block(doc: &str, lang: &str, holding: &str) -> String {
    let fence = format!("```{lang}\n");
    let mut rest = doc;
    while let Some(at) = rest.find(&fence) {
        let body = &rest[at + fence.len()..];
        let len = body.find("```").unwrap();
        if body[..len].contains(holding) {
            return body[..len].to_owned();
        }
        rest = &body[len..];
    }
    panic!("no {lang} block holding {holding:?}")
}

fn doc() -> String {
    std::fs::read_to_string(common::repo_root().join("docs/notifications.md")).unwrap()
}

#[derive(serde::Deserialize)]
struct File {
    notify: Vec<drift_notify::NotifierConfig>,
}

#[test]
fn the_documented_notify_block_parses_and_validates() {
    let file: File = serde_saphyr::from_str(&fenced_block(&doc(), "yaml", "notify:")).unwrap();
    let names: Vec<&str> = file.notify.iter().map(|n| n.name()).collect();
    assert_eq!(names, ["ops-webhook", "team-chat", "oncall-mail"]);
    let env = |name: &str| match name {
        "DRIFT_SLACK_URL" => Some("https://hooks.slack.com/services/T0/B0/x".to_owned()),
        n if n.starts_with("DRIFT_") => Some("set".to_owned()),
        _ => None,
    };
    drift_notify::validate(&file.notify, &env).unwrap();
    let err = drift_notify::validate(&file.notify, &|_: &str| None).unwrap_err().to_string();
    assert!(err.contains("notify[2].password_env: the environment variable DRIFT_SMTP_PASSWORD is not set"), "{err}");
}

#[test]
fn the_documented_homelab_notifiers_parse_and_validate() {
    let file: File = serde_saphyr::from_str(&fenced_block(&doc(), "yaml", "type: ntfy")).unwrap();
    let types: Vec<&str> = file.notify.iter().map(|n| n.kind.type_name()).collect();
    assert_eq!(types, ["ntfy", "gotify", "discord", "telegram", "teams", "alertmanager"]);
    let env = |name: &str| match name {
        "DRIFT_DISCORD_WEBHOOK" => Some("https://discord.com/api/webhooks/1/x".to_owned()),
        "DRIFT_TEAMS_WEBHOOK" => Some("https://example.com/workflows/x?sig=y".to_owned()),
        n if n.starts_with("DRIFT_") => Some("set".to_owned()),
        _ => None,
    };
    drift_notify::validate(&file.notify, &env).unwrap();
    common::install_crypto_provider();
    for n in &file.notify {
        drift_notify::build_with_env(n, &env).unwrap();
    }
}

#[test]
fn the_documented_template_validates_and_renders() {
    let file: File = serde_saphyr::from_str(&fenced_block(&doc(), "yaml", "template: |")).unwrap();
    drift_notify::validate(&file.notify, &|_: &str| None).unwrap();
    let source = file.notify[0].template.as_deref().unwrap();
    let message = drift_notify::Message::new(
        "phone",
        vec![event(EventKind::Opened, drift(1, "shop", "web", Severity::High))],
        None,
    );
    let text = drift_notify::template::render(source, &message, drift_notify::template::Markup::Plain).unwrap();
    assert!(
        text.contains("Deployment shop/web spec.replicas: 3 -> 5 (changed by kubectl-edit at 2026-12-01 07:55 UTC)"),
        "{text}"
    );
}

#[test]
fn the_documented_python_receiver_checks_real_signatures() {
    let Some(python) = common::smtp_python("the_documented_python_receiver_checks_real_signatures") else { return };
    let message = drift_notify::Message::new(
        "ops",
        vec![event(EventKind::Opened, drift(1, "shop", "web", Severity::High))],
        None,
    );
    let body = serde_json::to_vec(&drift_notify::webhook_body(&message)).unwrap();
    let now = chrono::Utc::now().timestamp();
    let header = drift_notify::sign(b"doc-secret", now, &body);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("body.json"), &body).unwrap();
    let script = format!(
        "{}\nimport sys\nbody = open(sys.argv[1], 'rb').read()\nprint(verify(b'doc-secret', sys.argv[2], body), \
         verify(b'doc-secret', sys.argv[2], body + b' '), verify(b'other', sys.argv[2], body))\n",
        fenced_block(&doc(), "python", "")
    );
    let out = Command::new(python)
        .args(["-c", &script, dir.path().join("body.json").to_str().unwrap(), &header])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "True False False");
}
