//! The HTTP server against slow and odd clients (issue 37, item 5), over real TCP: a connection
//! that sends its headers slowly, one that sends nothing, a kept-alive one left unused and one
//! whose body stalls are closed after the configured (short) timeouts while `/health` answers;
//! connections beyond the cap wait until one closes; a `Host` the server does not answer to is
//! answered 421. Functional checks: each waits for the server to close the connection (or
//! answer), bounded by a generous limit that only catches a server that never does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use drift_api::server::{AllowedHosts, ServerLimits, serve};
use drift_api::{ApiState, ApiToken, ScanTrigger, TriggerOutcome, router};
use drift_model::memory::MemoryStore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug)]
struct NeverRunning;

#[async_trait]
impl ScanTrigger for NeverRunning {
    async fn trigger(&self, _wait: bool) -> drift_model::Result<TriggerOutcome> {
        Ok(TriggerOutcome::Started { scan_id: "scan-1".to_owned() })
    }
}

const TOKEN: &str = "a-long-random-token-for-the-server-test";
/// Longer than any timeout of the tests: a connection still open after it was never closed.
const NEVER: Duration = Duration::from_secs(20);

/// A server with these limits and hosts on a free port; its address and a stop button.
async fn start(limits: ServerLimits, hosts: AllowedHosts) -> (String, tokio::sync::oneshot::Sender<()>) {
    let state = ApiState::new(Arc::new(MemoryStore::new()), Arc::new(NeverRunning))
        .with_token(Some(ApiToken::new(TOKEN).unwrap()))
        .with_allowed_hosts(hosts);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve(listener, router(state), limits, async move {
        let _ = stopped.await;
    }));
    (addr, stop)
}

/// Reads until the server closes the connection; what it sent, or `None` if it was still open
/// after [`NEVER`].
async fn until_closed(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(NEVER, async {
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    read.ok().map(|()| got)
}

/// One request on a new connection; the status line's code and the body.
async fn request(addr: &str, host: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let got = until_closed(&mut s).await.expect("an answer and a close");
    let text = String::from_utf8_lossy(&got).into_owned();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default())
}

fn short() -> ServerLimits {
    ServerLimits {
        header_read_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_millis(300),
        max_connections: 64,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_silence_an_unused_keep_alive_and_a_stalled_body_are_closed_while_health_answers() {
    let (addr, _stop) = start(short(), AllowedHosts::default()).await;

    // Headers sent slowly: a byte now and then, never the end of the head.
    let mut slow = TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n").await.unwrap();
    let trickle = tokio::spawn(async move {
        for _ in 0..200 {
            if slow.write_all(b"X").await.is_err() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    });
    // Nothing sent at all.
    let mut silent = TcpStream::connect(&addr).await.unwrap();
    // A kept-alive connection, used once.
    let mut kept = TcpStream::connect(&addr).await.unwrap();
    kept.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
    // A body that stalls: a decision of 100 bytes announced, 10 sent.
    let mut stalled = TcpStream::connect(&addr).await.unwrap();
    stalled
        .write_all(
            format!(
                "POST /drifts/1/decisions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\
                 Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"action\":"
            )
            .as_bytes(),
        )
        .await
        .unwrap();

    // Meanwhile the server answers.
    assert_eq!(request(&addr, &addr, "/health").await.0, 200);

    assert_eq!(until_closed(&mut silent).await, Some(Vec::new()), "a silent connection is closed, unanswered");
    let answered = until_closed(&mut kept).await.expect("an unused kept-alive connection is closed");
    assert!(answered.starts_with(b"HTTP/1.1 200"), "its one request was answered first");
    assert!(until_closed(&mut stalled).await.is_some(), "a stalled body is closed");
    let closed = tokio::time::timeout(NEVER, trickle).await.expect("slow headers are cut off").unwrap();
    assert!(closed, "the slow sender's connection was closed under it");
    assert_eq!(request(&addr, &addr, "/health").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_wait_until_one_closes() {
    let limits = ServerLimits {
        header_read_timeout: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(60),
        max_connections: 2,
    };
    let (addr, _stop) = start(limits, AllowedHosts::default()).await;
    let held: Vec<TcpStream> = vec![TcpStream::connect(&addr).await.unwrap(), TcpStream::connect(&addr).await.unwrap()];
    // The third connects (the kernel's queue) but is not served while two are open.
    let mut third = TcpStream::connect(&addr).await.unwrap();
    third.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(500), third.read(&mut buf)).await;
    assert!(early.is_err(), "no answer while the two connections of the cap are open");
    drop(held);
    let got = until_closed(&mut third).await.expect("served once one closed");
    assert!(got.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&got));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_the_server_does_not_answer_to_is_421_and_the_others_are_served() {
    let hosts = AllowedHosts::new(&["drift.example.com".to_owned()], Some("drift")).unwrap();
    let (addr, stop) = start(short(), hosts).await;
    for host in [
        addr.as_str(),
        "localhost:8080",
        "[::1]:8080",
        "drift-detector",
        "drift-detector.drift",
        "drift-detector.drift.svc.cluster.local:8080",
        "DRIFT.example.com.",
    ] {
        assert_eq!(request(&addr, host, "/health").await.0, 200, "{host}");
    }
    for host in ["attacker.example", "attacker.example:8080", "127.0.0.1.nip.io", "drift.example.com.evil"] {
        for path in ["/health", "/drifts", "/openapi.json", "/"] {
            let (status, body) = request(&addr, host, path).await;
            assert_eq!(status, 421, "{host} {path}: {body}");
            let error: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert!(error["error"].as_str().unwrap().contains("Host"), "{body}");
        }
    }
    // An absolute request target names its host too.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    s.write_all(b"GET http://attacker.example/drifts HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let got = until_closed(&mut s).await.unwrap();
    assert!(got.starts_with(b"HTTP/1.1 421"), "{}", String::from_utf8_lossy(&got));
    // The server stops when asked, its connections done.
    stop.send(()).unwrap();
}
