//! Watch streams: newline-delimited JSON events (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`,
//! `ERROR`) from a resourceVersion, with bookmarks, timeouts, 410 Gone for compacted versions,
//! and injected drops (a fault rule, or every open watch at once).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::{Change, TypeKey};

/// What a watch selects and how it behaves.
#[derive(Debug, Clone)]
pub struct WatchSpec {
    /// Resource type.
    pub key: TypeKey,
    /// Namespace, or None for all.
    pub namespace: Option<String>,
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
    /// Whether BOOKMARK events are sent.
    pub bookmarks: bool,
    /// Interval of bookmarks.
    pub bookmark_interval: Duration,
    /// Close the stream after this long.
    pub timeout: Option<Duration>,
    /// Close the stream after this many events (injected fault).
    pub drop_after: Option<u32>,
    /// apiVersion and kind for bookmark objects and for output.
    pub api_version: String,
    /// Kind.
    pub kind: String,
    /// Render events as Tables (kubectl get -w).
    pub table: Option<String>,
}

impl WatchSpec {
    fn selects(&self, c: &Change) -> bool {
        c.key == self.key
            && self.namespace.as_ref().is_none_or(|n| *n == c.namespace)
            && self.labels.matches(&c.object)
            && self.fields.matches(&c.object)
    }

    fn render(&self, kind: &str, object: &Value) -> Bytes {
        let mut object = object.clone();
        if let Some(m) = object.as_object_mut() {
            m.insert("apiVersion".into(), json!(self.api_version));
        }
        let object = match &self.table {
            Some(include) if kind != "BOOKMARK" && kind != "ERROR" => {
                crate::table::table(&[&object], json!({}), include)
            }
            _ => object,
        };
        let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
        line.push(b'\n');
        Bytes::from(line)
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end && let Some(m) = meta.as_object_mut() {
            m.insert("annotations".into(), json!({"k8s.io/initial-events-end": "true"}));
        }
        self.render("BOOKMARK", &json!({"kind": self.kind, "apiVersion": self.api_version, "metadata": meta}))
    }
}

/// The start of a watch, computed under the store lock.
#[derive(Debug)]
pub struct WatchStart {
    /// Events to send first (synthetic ADDED events or the history after the version).
    pub initial: Vec<(String, Value)>,
    /// Whether to send a bookmark marking the end of the initial events.
    pub initial_end_bookmark: bool,
    /// Current resourceVersion.
    pub rv: u64,
    /// Live changes, subscribed under the same lock.
    pub rx: broadcast::Receiver<Arc<Change>>,
    /// 410 Gone to send as an ERROR event instead.
    pub gone: Option<ApiError>,
    /// Changes when the test drops every open watch ([`crate::TestApiServer::drop_watches`]):
    /// the stream then ends, as after a lost connection.
    pub drop: tokio::sync::watch::Receiver<u64>,
}

/// Serve a watch as a streaming response.
pub fn respond(spec: WatchSpec, start: WatchStart, mut shutdown: tokio::sync::watch::Receiver<bool>) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let mut sent: u32 = 0;
        let dropped = |sent: u32| spec.drop_after.is_some_and(|n| sent >= n);
        if let Some(err) = &start.gone {
            let _ = tx.send(spec.render("ERROR", &err.status())).await;
            return;
        }
        if dropped(sent) {
            return;
        }
        let mut last_rv = start.rv;
        for (kind, obj) in &start.initial {
            if tx.send(spec.render(kind, obj)).await.is_err() {
                return;
            }
            sent += 1;
            if dropped(sent) {
                return;
            }
        }
        if start.initial_end_bookmark && tx.send(spec.bookmark(start.rv, true)).await.is_err() {
            return;
        }
        let mut rx_live = start.rx;
        let mut dropped_by_test = start.drop;
        let deadline = spec.timeout.map(|t| tokio::time::Instant::now() + t);
        let mut ticker = tokio::time::interval(spec.bookmark_interval);
        ticker.tick().await;
        loop {
            let timeout = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = timeout => return,
                _ = shutdown.changed() => return,
                _ = dropped_by_test.changed() => return,
                _ = ticker.tick(), if spec.bookmarks => {
                    if tx.send(spec.bookmark(last_rv, false)).await.is_err() {
                        return;
                    }
                }
                ev = rx_live.recv() => {
                    let c = match ev {
                        Ok(c) => c,
                        // A watcher too slow to keep up is closed, as the API server does; the
                        // client resumes from its last version.
                        Err(_) => return,
                    };
                    if c.rv <= start.rv {
                        continue;
                    }
                    last_rv = c.rv;
                    if !spec.selects(&c) {
                        continue;
                    }
                    if tx.send(spec.render(c.kind, &c.object)).await.is_err() {
                        return;
                    }
                    sent += 1;
                    if dropped(sent) {
                        return;
                    }
                }
            }
        }
    });
    let stream =
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx)) });
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}
