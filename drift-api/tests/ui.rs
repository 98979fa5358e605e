//! The web page as the router serves it: content types, the Content-Security-Policy and cache
//! headers, revalidation with the ETag, no token needed for the page while the API behind it
//! keeps its read token, and assets that keep to the policy (no inline script or style, no
//! value reaching the page as HTML). The page in a real browser: drift-bin/tests/ui.rs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use common::*;
use drift_api::ui::{ASSETS, CONTENT_SECURITY_POLICY};
use drift_api::{ApiState, ApiToken, router};

fn header<'a>(a: &'a Answer, name: &str) -> &'a str {
    a.headers.get(name).unwrap_or_else(|| panic!("no {name} header")).to_str().unwrap()
}

#[tokio::test]
async fn the_page_and_its_assets_are_served_with_their_types_policy_and_cache_headers() {
    let h = harness().await;
    let page = get(&h.app, "/").await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(header(&page, "content-type"), "text/html; charset=utf-8");
    assert!(page.text.contains("<script src=\"/ui/app.js\" defer></script>"), "{}", page.text);
    let expected = [
        ("/ui/app.js", "text/javascript; charset=utf-8"),
        ("/ui/app.css", "text/css; charset=utf-8"),
        ("/ui/icon.svg", "image/svg+xml"),
    ];
    for (path, content_type) in expected {
        assert!(page.text.contains(path), "index.html refers to {path}");
        let a = get(&h.app, path).await;
        assert_eq!(a.status, StatusCode::OK, "{path}");
        assert_eq!(header(&a, "content-type"), content_type, "{path}");
    }
    for path in ["/", "/ui/app.js", "/ui/app.css", "/ui/icon.svg"] {
        let a = get(&h.app, path).await;
        assert_eq!(header(&a, "content-security-policy"), CONTENT_SECURITY_POLICY, "{path}");
        assert_eq!(header(&a, "x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header(&a, "referrer-policy"), "no-referrer", "{path}");
        assert_eq!(header(&a, "cache-control"), "no-cache", "{path}");
        let etag = header(&a, "etag").to_owned();
        assert!(etag.starts_with('"') && etag.ends_with('"') && etag.len() == 34, "{path}: {etag}");
        // Revalidation: the same ETag answers 304 without a body; another one, the file.
        let again = call(&h.app, Method::GET, path, &[("if-none-match", &etag)]).await;
        assert_eq!(again.status, StatusCode::NOT_MODIFIED, "{path}");
        assert!(again.text.is_empty());
        assert_eq!(header(&again, "etag"), etag);
        let other = call(&h.app, Method::GET, path, &[("if-none-match", "\"0000\"")]).await;
        assert_eq!(other.status, StatusCode::OK, "{path}");
    }
    // The policy allows nothing inline and nothing from elsewhere.
    for part in
        ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"]
    {
        assert!(CONTENT_SECURITY_POLICY.contains(part), "{part}");
    }
    assert!(!CONTENT_SECURITY_POLICY.contains("unsafe"), "{CONTENT_SECURITY_POLICY}");
}

#[tokio::test]
async fn unknown_files_and_other_methods_answer_json_errors() {
    let h = harness().await;
    for path in ["/ui/nope.js", "/ui/index.html", "/ui/", "/ui/../Cargo.toml"] {
        let a = get(&h.app, path).await;
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{path}");
        assert!(a.json()["error"].is_string(), "{path}: {}", a.text);
    }
    for path in ["/", "/ui/app.js"] {
        let a = call(&h.app, Method::POST, path, &[]).await;
        assert_eq!(a.status, StatusCode::METHOD_NOT_ALLOWED, "{path}");
        assert!(a.json()["error"].is_string());
    }
}

#[tokio::test]
async fn the_page_needs_no_token_but_the_api_behind_it_keeps_its_read_token() {
    let store = filled_store().await;
    let state = ApiState::new(store, Arc::new(FakeTrigger::default()))
        .with_token(Some(ApiToken::new(TOKEN).unwrap()))
        .with_read_token(Some(ApiToken::named("reader", "read-token-7c1e").unwrap()));
    let app = router(state);
    assert_eq!(get(&app, "/").await.status, StatusCode::OK);
    assert_eq!(get(&app, "/ui/app.js").await.status, StatusCode::OK);
    assert_eq!(get(&app, "/stats").await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(get(&app, "/scans").await.status, StatusCode::UNAUTHORIZED);
    let a = call(&app, Method::GET, "/scans", &[("authorization", "Bearer read-token-7c1e")]).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
}

#[tokio::test]
async fn scans_lists_the_last_scans_newest_first_with_their_coverage_gaps() {
    let h = harness().await;
    let a = get(&h.app, "/scans").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let items = a.json()["items"].as_array().unwrap().clone();
    let recorded = reports();
    assert_eq!(items.len(), recorded.len());
    let newest = recorded.iter().max_by_key(|r| r.started_at).unwrap();
    assert_eq!(items[0]["scan_id"], newest.scan_id.as_str());
    let gaps: Vec<_> = newest.coverage.incomplete().collect();
    assert_eq!(items[0]["coverage_gaps"].as_array().unwrap().len(), gaps.len());
    assert_eq!(get(&h.app, "/scans?limit=1").await.json()["items"].as_array().unwrap().len(), 1);
    for bad in ["/scans?limit=0", "/scans?limit=101", "/scans?limit=x", "/scans?limit=1&limit=2", "/scans?status=open"]
    {
        assert_eq!(get(&h.app, bad).await.status, StatusCode::BAD_REQUEST, "{bad}");
    }
}

#[tokio::test]
async fn a_coverage_gap_is_listed_with_its_kind_namespace_and_reason() {
    use drift_model::{CoverageStatus, DriftSink, GroupKind};
    let h = harness().await;
    let mut r = reports().remove(0);
    r.scan_id = "with-a-gap".into();
    r.started_at = drift_testkit::fixtures::t(200);
    r.finished_at = drift_testkit::fixtures::t(201);
    r.coverage.set(
        &GroupKind::new("apps", "Deployment"),
        Some("billing"),
        CoverageStatus::Forbidden { message: "deployments is forbidden".into() },
    );
    h.store.record(&r).await.unwrap();
    let items = get(&h.app, "/scans?limit=1").await.json()["items"].clone();
    assert_eq!(items[0]["scan_id"], "with-a-gap");
    assert_eq!(
        items[0]["coverage_gaps"],
        serde_json::json!([{"group": "apps", "kind": "Deployment", "namespace": "billing", "status": "forbidden",
                            "message": "deployments is forbidden"}])
    );
}

/// The assets keep to the policy: no inline script, style or event handler in the page, and the
/// script never turns a value into HTML (every value is set as text).
#[test]
fn the_assets_hold_no_inline_code_and_never_write_html() {
    let text = |name: &str| std::str::from_utf8(ASSETS.iter().find(|a| a.name == name).unwrap().body).unwrap();
    let html = text("index.html");
    assert_eq!(html.matches("<script").count(), 1, "one script, from a file");
    assert!(!html.contains("style="), "no inline style");
    assert!(!html.contains("<style"), "no inline style");
    for attr in [" onclick", " onload", " onerror", " onsubmit", "javascript:"] {
        assert!(!html.contains(attr), "no inline handler {attr}");
    }
    let js = text("app.js");
    for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"] {
        assert!(!js.contains(sink), "app.js uses {sink}");
    }
    for external in ["http://", "https://"] {
        let outside: Vec<&str> =
            [html, text("app.css"), js].into_iter().flat_map(|t| t.lines()).filter(|l| l.contains(external)).collect();
        // The only absolute URL is the SVG namespace, which is a name, not a request.
        assert!(outside.iter().all(|l| l.contains("http://www.w3.org/2000/svg")), "{outside:?}");
    }
}
