//! Notifications end to end, on both stores: `drift serve` in watch mode over the test API
//! server, a real git repository and a local webhook receiver that verifies every signature.
//! A kubectl change reaches the receiver once with a valid signature and its revert follows;
//! a receiver that is down gets it later (the attempts are in the audit trail); `drift serve`
//! killed with SIGKILL while it sends delivers every event after a restart; a PostgreSQL
//! restart loses nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use common::{Answer, GitRepo, Received, Receiver, Serve, get_json, kubectl, wait_for};
use drift_test_apiserver::{Options, TestApiServer};
use drift_testkit_pg::PgServer;
use serde_json::Value;

const SECRET: &str = "hook-secret-for-tests-only";

/// Where the history goes.
enum Db {
    Sqlite,
    Postgres(PgServer),
}

struct World {
    server: TestApiServer,
    home: tempfile::TempDir,
    repo: GitRepo,
    db: Db,
    db_url: String,
    config: PathBuf,
    receiver: Receiver,
}

impl World {
    fn start(db: &str) -> World {
        let home = tempfile::tempdir().unwrap();
        let (db, db_url) = match db {
            "postgres" => {
                let pg = PgServer::start().unwrap();
                let url = tokio::runtime::Runtime::new().unwrap().block_on(pg.create_database()).unwrap();
                (Db::Postgres(pg), url)
            }
            _ => (Db::Sqlite, format!("sqlite://{}", home.path().join("drift.db").display())),
        };
        let server = TestApiServer::start(Options::default()).unwrap();
        let repo = GitRepo::shop(home.path().join("repo"));
        let receiver = Receiver::start();
        let config = home.path().join("drift.yaml");
        std::fs::write(
            &config,
            format!(
                "cluster: e2e\ninterval: 1h\nwatch: true\ndatabase_env: E2E_DATABASE_URL\napi:\n  listen: 127.0.0.1:0\n  token_env: E2E_TOKEN\n\
                 repositories:\n  - name: shop\n    url: file://{repo}\n    ref: main\n    path: apps\n    cache_dir: {cache}\n\
                 live:\n  kubeconfig: {kubeconfig}\n\
                 notify:\n  - name: hook\n    type: webhook\n    url: {hook}/hook\n    secret_env: E2E_HOOK_SECRET\n    backoff: {{initial: 200ms, max: 1s}}\n\
                 notifications:\n  link: http://drift.example/\n  tick: 100ms\n  lease: 3s\n",
                repo = repo.dir.display(),
                cache = home.path().join("cache").display(),
                kubeconfig = server.kubeconfig_path().display(),
                hook = receiver.url,
            ),
        )
        .unwrap();
        let world = World { server, home, repo, db, db_url, config, receiver };
        world.kubectl(&["apply", "-R", "-f", world.repo.dir.join("apps").to_str().unwrap()]);
        world
    }

    fn kubectl(&self, args: &[&str]) -> String {
        kubectl(self.server.kubeconfig_path(), self.home.path(), args, &[])
    }

    fn serve(&self) -> Serve {
        let serve = Serve::start(
            &self.config,
            &[("E2E_DATABASE_URL", &self.db_url), ("E2E_TOKEN", "t0ken"), ("E2E_HOOK_SECRET", SECRET)],
        );
        wait_for(Duration::from_secs(60), "the first pass", || {
            (common::http(&serve.addr, "GET", "/ready", None).0 == 200).then_some(())
        });
        serve
    }

    /// `drift ARGS --config FILE` with the world's environment: exit code, stdout, stderr.
    fn drift(&self, args: &[&str]) -> (i32, String, String) {
        let out = common::drift_command()
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .env("NO_COLOR", "1")
            .env("HOME", self.home.path())
            .env_remove("KUBECONFIG")
            .envs([("E2E_DATABASE_URL", self.db_url.as_str()), ("E2E_TOKEN", "t0ken"), ("E2E_HOOK_SECRET", SECRET)])
            .output()
            .unwrap();
        (out.status.code().unwrap(), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
    }

    fn scale(&self, replicas: u32) {
        self.kubectl(&["scale", "deployment/web", "-n", "shop", &format!("--replicas={replicas}")]);
    }

    /// The messages the receiver answered 200, their signatures checked.
    fn delivered(&self) -> Vec<Value> {
        self.receiver.received().iter().filter(|r| r.answer == Answer::Ok).map(verified).collect()
    }

    /// Waits until a delivered message holds an event of `kind` about `spec.replicas`.
    fn wait_for_event(&self, kind: &str, what: &str) -> Value {
        wait_for(Duration::from_secs(30), what, || {
            self.delivered()
                .into_iter()
                .flat_map(|m| events(&m))
                .find(|e| e["kind"] == kind && e["drift"]["path"] == "spec.replicas")
        })
    }
}

/// The JSON body of a request whose signature holds, with the idempotency key it carries.
fn verified(r: &Received) -> Value {
    let header = r.header(drift_notify::SIGNATURE_HEADER).expect("a signature header");
    let now = chrono::Utc::now().timestamp();
    drift_notify::verify(SECRET.as_bytes(), header, &r.body, now, Duration::from_secs(300))
        .unwrap_or_else(|e| panic!("signature of a webhook: {e}"));
    assert!(drift_notify::verify(b"another-secret", header, &r.body, now, Duration::from_secs(300)).is_err());
    let body = r.json();
    assert_eq!(r.header("idempotency-key"), body["message_id"].as_str(), "the message id is the idempotency key");
    body
}

fn events(message: &Value) -> Vec<Value> {
    message["events"].as_array().cloned().unwrap_or_default()
}

/// How many messages each event id was delivered in.
fn counts(messages: &[Value]) -> BTreeMap<String, usize> {
    let mut n = BTreeMap::new();
    for m in messages {
        for id in m["event_ids"].as_array().unwrap() {
            *n.entry(id.as_str().unwrap().to_owned()).or_default() += 1;
        }
    }
    n
}

macro_rules! on_both {
    ($($name:ident),+) => {
        mod sqlite { $( #[test] fn $name() { super::$name(super::World::start("sqlite")) } )+ }
        mod postgres { $( #[test] fn $name() { super::$name(super::World::start("postgres")) } )+ }
    };
}

on_both!(
    a_kubectl_change_reaches_the_signed_webhook_once_and_its_revert_follows,
    a_receiver_that_is_down_gets_it_later_with_the_attempts_in_the_audit_trail,
    killed_while_sending_it_delivers_every_event_after_a_restart,
    restarts_scans_and_a_key_rotation_on_a_store_with_open_secret_drifts_send_no_notification
);

fn a_kubectl_change_reaches_the_signed_webhook_once_and_its_revert_follows(world: World) {
    let serve = world.serve();
    assert!(world.delivered().is_empty(), "in sync: nothing to tell");
    world.scale(5);
    let opened = world.wait_for_event("opened", "the opened event of the scale");
    assert_eq!(opened["drift"]["cluster_value"], 5);
    assert_eq!(opened["drift"]["git_value"], 2);
    assert_eq!(opened["drift"]["severity"], "LOW", "replicas_drift is LOW by default");
    assert!(opened["drift"]["changed_by"].as_str().unwrap().starts_with("kubectl"), "{opened}");
    let id = opened["drift"]["id"].as_i64().unwrap();
    assert_eq!(opened["drift"]["link"], format!("http://drift.example/drifts/{id}"));
    world.scale(2);
    let resolved = world.wait_for_event("resolved", "the resolution when put back");
    assert_eq!(resolved["drift"]["resolution"], "reverted");
    // The drift shows both notifications sent once they are settled (after the receiver's
    // answer); each event went in exactly one message.
    wait_for(Duration::from_secs(30), "both notifications settled as sent", || {
        let drift = get_json(&serve.addr, &format!("/drifts/{id}"));
        let sent: Vec<_> = drift["notifications"].as_array()?.iter().map(|d| d["status"].clone()).collect();
        (sent.len() == 2 && sent.iter().all(|s| s == "sent")).then_some(())
    });
    let n = counts(&world.delivered());
    assert!(n.values().all(|c| *c == 1), "{n:?}");
    serve.stop();
}

fn a_receiver_that_is_down_gets_it_later_with_the_attempts_in_the_audit_trail(world: World) {
    let serve = world.serve();
    world.receiver.answer(Answer::Status(503));
    world.scale(4);
    wait_for(Duration::from_secs(30), "three refused attempts", || {
        (world.receiver.received().iter().filter(|r| r.answer == Answer::Status(503)).count() >= 3).then_some(())
    });
    world.receiver.answer(Answer::Ok);
    let opened = world.wait_for_event("opened", "delivery once the receiver is back");
    assert_eq!(opened["drift"]["cluster_value"], 4);
    // The receiver answers before the delivery is settled: wait for the settle's audit entry.
    let audit = wait_for(Duration::from_secs(30), "the sent attempt in the audit trail", || {
        let audit = get_json(&serve.addr, "/audit?notifier=hook&action=notification");
        (audit["items"][0]["status"] == "sent").then_some(audit)
    });
    let statuses: Vec<_> = audit["items"].as_array().unwrap().iter().rev().map(|a| a["status"].clone()).collect();
    assert!(statuses.len() >= 4 && statuses[..3].iter().all(|s| s == "retry"), "{audit}");
    assert_eq!(statuses.last().unwrap(), "sent");
    let attempts = audit["items"][0]["attempts"].as_i64().unwrap();
    assert!(attempts >= 4, "{audit}");
    serve.stop();
}

fn killed_while_sending_it_delivers_every_event_after_a_restart(world: World) {
    let mut serve = world.serve();
    world.receiver.answer(Answer::Hang);
    world.scale(6);
    let taken = wait_for(Duration::from_secs(30), "a send in flight", || {
        world.receiver.received().into_iter().find(|r| r.answer == Answer::Hang)
    });
    let ids: BTreeSet<String> =
        verified(&taken)["event_ids"].as_array().unwrap().iter().map(|i| i.as_str().unwrap().to_owned()).collect();
    serve.kill();
    world.receiver.answer(Answer::Ok);
    // PostgreSQL restarted while nobody serves: nothing is lost either.
    if let Db::Postgres(pg) = &world.db {
        pg.restart().unwrap();
    }
    let serve = world.serve();
    let delivered = wait_for(Duration::from_secs(30), "the same events after the lease", || {
        let got: BTreeSet<String> = counts(&world.delivered()).into_keys().collect();
        ids.is_subset(&got).then_some(got)
    });
    assert!(!delivered.is_empty());
    serve.stop();
}

/// Regression test of issue 37, item 1: the key of the Secret-value hash was random per process,
/// so every restart of `drift serve` and every `drift scan` re-hashed the open Secret drifts
/// into `changed` events and a notification, with nothing changed in the cluster. The store
/// keeps one key now: two open Secret drifts, then `drift scan` twice, a restart, a rotation of
/// the key (`drift secret-key rotate`) and another restart, and not one event about them but
/// their opening; a change made after all of that is told, and after it (events go out in the
/// order they were written) nothing else was.
fn restarts_scans_and_a_key_rotation_on_a_store_with_open_secret_drifts_send_no_notification(world: World) {
    const SECRET_YAML: &str = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: shop\n\
        stringData:\n  password: git-secret-value-1\n  token: git-secret-token-1\n";
    world.repo.write("apps/web/secret.yaml", SECRET_YAML);
    world.repo.commit("a Secret");
    world.kubectl(&["apply", "-f", world.repo.dir.join("apps/web/secret.yaml").to_str().unwrap()]);
    world.kubectl(&[
        "patch",
        "secret",
        "creds",
        "-n",
        "shop",
        "-p",
        r#"{"stringData":{"password":"hand-set-secret-4","token":"hand-set-token-4"}}"#,
    ]);
    // Distinct events: a message sent just before a stop may be sent again by the next process
    // (delivery is at least once; the event id is the receiver's idempotency key).
    let secret_events = |world: &World| -> Vec<(String, String)> {
        let distinct: BTreeMap<String, (String, String)> = world
            .delivered()
            .iter()
            .flat_map(events)
            .filter(|e| e["drift"]["kind"] == "Secret")
            .map(|e| {
                let text = |v: &Value| v.as_str().unwrap().to_owned();
                (text(&e["id"]), (text(&e["kind"]), text(&e["drift"]["path"])))
            })
            .collect();
        distinct.into_values().collect()
    };
    let serve = world.serve();
    wait_for(Duration::from_secs(30), "the two Secret drifts told", || {
        (secret_events(&world).len() >= 2).then_some(())
    });
    serve.stop();
    for _ in 0..2 {
        let (code, out, err) = world.drift(&["scan"]);
        assert_eq!(code, 1, "the drifts are still there: {out}{err}");
    }
    let (code, before, err) = world.drift(&["secret-key", "id"]);
    assert_eq!(code, 0, "{err}");
    let serve = world.serve();
    serve.stop();
    let (code, out, err) = world.drift(&["secret-key", "rotate"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2 live Secret drift(s) re-hashed without an event"), "{out}");
    let (_, after, _) = world.drift(&["secret-key", "id"]);
    assert_ne!(before, after, "a new key");
    assert_eq!(after.trim().len(), 16, "{after}");
    let (code, out, err) = world.drift(&["scan"]);
    assert_eq!(code, 1, "{out}{err}");
    let serve = world.serve();
    world.scale(5);
    world.wait_for_event("opened", "the change made after the restarts");
    let mut told = secret_events(&world);
    told.sort();
    if told.len() != 2 {
        // Secret values are hashed in events (checked below): the events are safe to show.
        let secret: Vec<Value> =
            world.delivered().iter().flat_map(events).filter(|e| e["drift"]["kind"] == "Secret").collect();
        eprintln!("DEBUG secret events: {}", serde_json::to_string_pretty(&secret).unwrap());
    }
    assert_eq!(
        told,
        [("opened".to_owned(), "data.password".to_owned()), ("opened".to_owned(), "data.token".to_owned())],
        "only their opening"
    );
    let kinds: Vec<Value> = world.delivered().iter().flat_map(events).map(|e| e["kind"].clone()).collect();
    assert!(!kinds.contains(&Value::from("changed")), "{kinds:?}");
    let log = serve.stop();
    for shown in [log, serde_json::to_string(&world.delivered()).unwrap()] {
        for value in ["hand-set-secret-4", "git-secret-value-1", "hand-set-token-4"] {
            assert!(!shown.contains(value), "a Secret value shown: {shown}");
        }
    }
}

/// Two `drift serve` processes on one PostgreSQL, both watching: a change is recorded by both,
/// opened once, and its event is delivered once (claims are leased to one process).
#[test]
fn two_serve_processes_on_one_postgres_deliver_each_event_once() {
    let world = World::start("postgres");
    let (a, b) = (world.serve(), world.serve());
    world.scale(7);
    world.wait_for_event("opened", "the opened event of the scale");
    world.scale(2);
    world.wait_for_event("resolved", "the resolution when put back");
    world.scale(8);
    // The same drift again, after its resolution: a new row, told as reopened.
    world.wait_for_event("reopened", "the drift back");
    std::thread::sleep(Duration::from_millis(300));
    let n = counts(&world.delivered());
    assert!(n.len() >= 3, "{n:?}");
    assert!(n.values().all(|c| *c == 1), "an event went out twice: {n:?}");
    a.stop();
    b.stop();
}
