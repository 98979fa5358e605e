//! The route table: every endpoint with its handler and its OpenAPI description, side by side,
//! so that [`router`] and [`crate::openapi::document`] cannot disagree.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use serde_json::{Value, json};

use crate::query::{DEFAULT_LIMIT, MAX_ID, MAX_LIMIT};
use crate::state::ApiState;
use crate::{acting, alerts, handlers, identity, remediation};

/// A parameter of an endpoint.
#[derive(Debug, Clone)]
pub struct Param {
    /// Name.
    pub name: &'static str,
    /// `query` or `path`.
    pub location: &'static str,
    /// Whether it must be given.
    pub required: bool,
    /// What it does.
    pub description: &'static str,
    /// JSON Schema of the value.
    pub schema: Value,
}

/// An answer of an endpoint.
#[derive(Debug, Clone)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// When it is given.
    pub description: &'static str,
    /// Content type.
    pub content_type: &'static str,
    /// JSON Schema (usually a `$ref` to a component).
    pub schema: Value,
}

/// Who may call an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone (`/health`, `/ready`, `/metrics`).
    Open,
    /// Anyone while no read token is configured; else the read token or a write token.
    Read,
    /// A write token; its name is the actor.
    Write,
}

/// One endpoint: method, path, documentation and handler.
pub struct Endpoint {
    /// HTTP method.
    pub method: Method,
    /// Path in axum and OpenAPI syntax (`/drifts/{id}`).
    pub path: &'static str,
    /// OpenAPI operationId.
    pub operation_id: &'static str,
    /// One line.
    pub summary: &'static str,
    /// More.
    pub description: &'static str,
    /// Who may call it.
    pub access: Access,
    /// Parameters.
    pub params: Vec<Param>,
    /// JSON Schema of the JSON request body, when it takes one.
    pub body: Option<Value>,
    /// Answers.
    pub answers: Vec<Answer>,
    handler: MethodRouter<ApiState>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint").field("method", &self.method).field("path", &self.path).finish_non_exhaustive()
    }
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

const JSON: &str = "application/json";

fn answer(status: u16, description: &'static str, schema: &str) -> Answer {
    Answer { status, description, content_type: JSON, schema: schema_ref(schema) }
}

fn error(status: u16, description: &'static str) -> Answer {
    answer(status, description, "Error")
}

fn refusal(status: u16, description: &'static str) -> Answer {
    answer(status, description, "Refused")
}

fn query(name: &'static str, description: &'static str, schema: Value) -> Param {
    Param { name, location: "query", required: false, description, schema }
}

fn drift_id_param() -> Param {
    Param {
        name: "id",
        location: "path",
        required: true,
        description: "drift id",
        schema: json!({"type": "integer", "minimum": 1, "maximum": MAX_ID}),
    }
}

fn page_params() -> [Param; 2] {
    [
        query(
            "limit",
            "page size",
            json!({"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}),
        ),
        query(
            "after",
            "cursor: the `next` of the previous page (rows with a smaller id)",
            json!({"type": "integer", "minimum": 1, "maximum": MAX_ID}),
        ),
    ]
}

/// The filter parameters of `GET /drifts` and `GET /stats`.
fn filter_params() -> Vec<Param> {
    vec![
        query("status", "open, waived or resolved", json!({"type": "string", "enum": ["open", "waived", "resolved"]})),
        query(
            "severity",
            "severity (case-insensitive)",
            json!({"type": "string", "enum": drift_model::Severity::ALL.map(drift_model::Severity::as_str)}),
        ),
        query(
            "drift_type",
            "drift type",
            json!({"type": "string", "enum": drift_model::DriftType::ALL.map(drift_model::DriftType::as_str)}),
        ),
        query("namespace", "namespace; empty for cluster-scoped objects", json!({"type": "string"})),
        query("repository", "repository name", json!({"type": "string", "minLength": 1})),
        query("cluster", "cluster name", json!({"type": "string", "minLength": 1})),
        query("kind", "resource kind, such as Deployment", json!({"type": "string", "minLength": 1})),
        query(
            "since",
            "only drifts seen at or after this RFC 3339 time (last_seen >= since); write + as %2B",
            json!({"type": "string", "format": "date-time"}),
        ),
    ]
}

/// The parameters of `GET /findings`.
fn finding_params() -> Vec<Param> {
    use drift_model::finding::{Rule, Side};
    let mut params = vec![
        query("status", "open or resolved", json!({"type": "string", "enum": ["open", "resolved"]})),
        query("rule", "rule id", json!({"type": "string", "enum": Rule::ALL.map(Rule::as_str)})),
        query(
            "severity",
            "severity (case-insensitive)",
            json!({"type": "string", "enum": drift_model::Severity::ALL.map(drift_model::Severity::as_str)}),
        ),
        query(
            "side",
            "where it was found: desired (Git) or live (the cluster)",
            json!({"type": "string", "enum": Side::ALL.map(Side::as_str)}),
        ),
        query("namespace", "namespace; empty for cluster-scoped objects", json!({"type": "string"})),
        query("kind", "resource kind, such as Deployment", json!({"type": "string", "minLength": 1})),
        query("repository", "repository name", json!({"type": "string", "minLength": 1})),
        query("cluster", "cluster name", json!({"type": "string", "minLength": 1})),
    ];
    params.extend(page_params());
    params
}

/// Every endpoint of the API. Each may also answer 414 and 431 ([`crate::limits`]).
pub fn endpoints() -> Vec<Endpoint> {
    let mut all = table();
    for e in &mut all {
        e.answers.push(error(414, "the URI (path and query string) is longer than 8 KiB"));
        e.answers.push(error(431, "more than 64 header fields, or more than 16 KiB of headers"));
    }
    all
}

fn table() -> Vec<Endpoint> {
    let bad_request = || error(400, "a parameter is unknown, repeated or malformed");
    let store_down = || error(503, "the store is not available");
    let read_refused = || error(401, "a read token is configured and the request has none, or a wrong one");
    let write_refused = || error(401, "no bearer token, or a wrong one");
    let write_disabled = || error(403, "no API token is configured: the endpoint is disabled");
    let no_act = || error(501, "the store keeps no decisions, audit trail or deliveries");
    let mut drifts_params = filter_params();
    drifts_params.extend(page_params());
    let mut audit_params = vec![
        query(
            "action",
            "what was recorded",
            json!({"type": "string", "enum": drift_model::act::AuditAction::ALL.map(drift_model::act::AuditAction::as_str)}),
        ),
        query("drift_id", "only about this drift", json!({"type": "integer", "minimum": 1, "maximum": MAX_ID})),
        query(
            "actor",
            "only by this actor (a token's name, a CLI user, scanner, notifier:NAME)",
            json!({"type": "string", "minLength": 1}),
        ),
        query("notifier", "only about this notifier", json!({"type": "string", "minLength": 1})),
        query(
            "status",
            "only with this outcome: a decision's action, a delivery attempt's status (sent, retry, parked, skipped), a scan's outcome",
            json!({"type": "string", "minLength": 1}),
        ),
        query(
            "since",
            "only entries at or after this RFC 3339 time; write + as %2B",
            json!({"type": "string", "format": "date-time"}),
        ),
    ];
    audit_params.extend(page_params());
    let mut notification_params = vec![
        query(
            "status",
            "only deliveries with this status",
            json!({"type": "string", "enum": drift_model::act::DeliveryStatus::ALL.map(drift_model::act::DeliveryStatus::as_str)}),
        ),
        query(
            "drift_id",
            "only deliveries of events about this drift",
            json!({"type": "integer", "minimum": 1, "maximum": MAX_ID}),
        ),
    ];
    notification_params.extend(page_params());
    vec![
        Endpoint {
            method: Method::GET,
            path: "/health",
            operation_id: "health",
            summary: "Liveness",
            description: "200 whenever the process serves requests; it does not look at the store.",
            access: Access::Open,
            params: vec![],
            body: None,
            answers: vec![answer(200, "the process is alive", "Health")],
            handler: get(handlers::health),
        },
        Endpoint {
            method: Method::GET,
            path: "/ready",
            operation_id: "ready",
            summary: "Readiness",
            description: "200 when the store answers, the newest scan is recent enough, and no repository whose \
                          last scan is recent had that scan fail; else 503 with the reason in `error`.",
            access: Access::Open,
            params: vec![],
            body: None,
            answers: vec![answer(200, "ready", "Ready"), answer(503, "not ready; `error` says why", "Ready")],
            handler: get(handlers::ready),
        },
        Endpoint {
            method: Method::POST,
            path: "/alertmanager/webhook",
            operation_id: "alertmanagerWebhook",
            summary: "Drift beside an alert",
            description: "Alertmanager's webhook receiver (payload version 4). For each firing alert with a \
                          `namespace` label (and optionally `cluster`, and a workload: `deployment`, `statefulset`, \
                          `daemonset` or `pod`), answers the drifts of that namespace seen in the window before the \
                          alert started (`alerts.window`, default 1h), which of them are the workload's, and the hand \
                          changes made in the window; with `alerts.notify` (default) and a store with an outbox, the \
                          open ones are sent to the notifiers whose route takes them, as one message per alert. Needs \
                          a write token (Alertmanager's `http_config.authorization.credentials`).",
            access: Access::Write,
            params: vec![],
            body: Some(json!({"type": "object", "required": ["version", "alerts"], "properties": {
                "version": {"const": "4"},
                "receiver": {"type": "string"}, "status": {"type": "string"},
                "alerts": {"type": "array", "items": {"type": "object", "required": ["status", "labels", "startsAt"],
                    "properties": {"status": {"type": "string"}, "labels": {"type": "object",
                        "additionalProperties": {"type": "string"}},
                        "startsAt": {"type": "string", "format": "date-time"}, "fingerprint": {"type": "string"}}}},
            }})),
            answers: vec![
                Answer {
                    status: 200,
                    description: "each firing alert with a namespace, with its drifts; the others under `skipped`",
                    content_type: JSON,
                    schema: json!({"type": "object", "required": ["alerts", "skipped", "emitted"], "properties": {
                        "receiver": {"type": "string"}, "status": {"type": "string"},
                        "alerts": {"type": "array", "items": {"type": "object",
                            "required": ["fingerprint", "alertname", "starts_at", "scope", "window", "drifts",
                                "workload_drifts", "hand_changes", "notified"],
                            "properties": {
                                "fingerprint": {"type": "string"}, "alertname": {"type": "string"},
                                "starts_at": {"type": "string", "format": "date-time"},
                                "scope": {"type": "object", "required": ["namespace"], "properties": {
                                    "cluster": {"type": ["string", "null"]}, "namespace": {"type": "string"},
                                    "kind": {"type": ["string", "null"]}, "name": {"type": ["string", "null"]}}},
                                "window": {"type": "object", "properties": {
                                    "from": {"type": "string", "format": "date-time"},
                                    "to": {"type": "string", "format": "date-time"}}},
                                "drifts": {"type": "array", "items": schema_ref("StoredDrift")},
                                "workload_drifts": {"type": "array", "items": {"type": "integer"},
                                    "description": "ids of the drifts of the alert's workload"},
                                "hand_changes": {"type": "array", "items": {"type": "integer"},
                                    "description": "ids of the drifts changed by hand (or by an unknown manager) in the window"},
                                "notified": {"type": "integer", "description": "open drifts sent to the notifiers"},
                            }}},
                        "skipped": {"type": "array", "items": {"type": "object"}},
                        "emitted": {"type": "integer", "description": "events new in the outbox (a repeated alert adds none)"},
                    }}),
                },
                error(400, "not Alertmanager's webhook payload version 4"),
                write_refused(),
                write_disabled(),
                store_down(),
            ],
            handler: post(alerts::alertmanager_webhook),
        },
        Endpoint {
            method: Method::POST,
            path: "/audit/webhook",
            operation_id: "auditWebhook",
            summary: "Receive Kubernetes audit events",
            description: "The endpoint of kube-apiserver's audit webhook backend (`--audit-webhook-config-file`): \
                          an `audit.k8s.io/v1` `EventList`, whose events of writes are joined with the drifts to \
                          name the person behind each change (`changed_by_user`; docs/kubernetes.md). Needs a \
                          write token (the webhook's kubeconfig user `token:`). The body is at most 2 MiB.",
            access: Access::Write,
            params: vec![],
            body: Some(json!({"type": "object", "required": ["kind", "apiVersion", "items"], "properties": {
                "kind": {"const": "EventList"},
                "apiVersion": {"type": "string", "pattern": "^audit\\.k8s\\.io/"},
                "items": {"type": ["array", "null"], "items": {"type": "object",
                    "description": "an audit.k8s.io/v1 Event",
                    "required": ["kind", "apiVersion", "auditID", "stage", "verb", "user",
                        "requestReceivedTimestamp", "stageTimestamp"],
                    "properties": {
                        "kind": {"const": "Event"},
                        "apiVersion": {"type": "string", "pattern": "^audit\\.k8s\\.io/"},
                        "level": {"type": ["string", "null"]}, "auditID": {"type": "string"}, "stage": {"type": "string"},
                        "requestURI": {"type": "string"}, "verb": {"type": "string"},
                        "user": {"type": "object", "properties": {"username": {"type": "string"},
                            "groups": {"type": "array", "items": {"type": "string"}}}},
                        "sourceIPs": {"type": "array", "items": {"type": "string"}},
                        "userAgent": {"type": ["string", "null"]},
                        "objectRef": {"type": ["object", "null"], "properties": {
                            "resource": {"type": "string"}, "namespace": {"type": ["string", "null"]},
                            "name": {"type": ["string", "null"]}, "apiGroup": {"type": ["string", "null"]},
                            "subresource": {"type": ["string", "null"]}}},
                        "responseStatus": {"type": ["object", "null"], "properties": {
                            "code": {"type": ["integer", "null"], "minimum": 0, "maximum": 999}}},
                        "requestReceivedTimestamp": {"type": "string", "format": "date-time"},
                        "stageTimestamp": {"type": "string", "format": "date-time"},
                    }}},
            }})),
            answers: vec![
                Answer {
                    status: 200,
                    description: "the events were taken; `kept` counts the completed writes kept for the join",
                    content_type: JSON,
                    schema: json!({"type": "object", "required": ["received", "kept"], "properties": {
                        "received": {"type": "integer", "minimum": 0}, "kept": {"type": "integer", "minimum": 0}}}),
                },
                error(400, "not an EventList, or an item that is not an audit event (nothing is kept)"),
                write_refused(),
                write_disabled(),
                error(501, "no `audit:` is configured"),
            ],
            handler: post(identity::audit_webhook),
        },
        Endpoint {
            method: Method::POST,
            path: "/check",
            operation_id: "checkMerge",
            summary: "What merging a branch would do",
            description: "Renders each repository (or the one named) at its configured ref and at `ref`, compares \
                          both with the cluster and answers what the merge would do, as `drift check --ref`: the \
                          live changes its apply overwrites (`fields[].effect` `overwrites_live_change`, with who \
                          changed them), the drifts it resolves, the fields it changes, the objects it creates, \
                          removes and changes that nobody touched. Nothing is recorded. `sure` is false when a side \
                          could not be read completely (`reasons` says why). Needs a write token (it fetches and \
                          renders Git and reads the cluster).",
            access: Access::Write,
            params: vec![
                Param {
                    required: true,
                    ..query(
                        "ref",
                        "the branch, tag or commit to check",
                        json!({"type": "string", "maxLength": 255,
                            "pattern": "^[A-Za-z0-9_+][A-Za-z0-9._+-]*(/[A-Za-z0-9_+][A-Za-z0-9._+-]*)*$"}),
                    )
                },
                query("repository", "only this repository of the configuration", json!({"type": "string"})),
            ],
            body: None,
            answers: vec![
                Answer {
                    status: 200,
                    description: "what the merge would do, by repository",
                    content_type: JSON,
                    schema: json!({"type": "object", "required": ["checks", "overwrites_live_changes", "sure", "reasons"],
                    "properties": {
                        "checks": {"type": "array", "items": {"type": "object",
                            "required": ["repository", "cluster", "fields", "objects", "left_open", "drift_ids"],
                            "properties": {
                                "repository": {"type": "string"}, "cluster": {"type": "string"},
                                "base": {"type": ["string", "null"]}, "head": {"type": ["string", "null"]},
                                "fields": {"type": "array", "items": {"type": "object", "required": ["effect", "drift"],
                                    "properties": {
                                        "effect": {"type": "string", "enum": ["overwrites_live_change", "resolves", "changes", "creates"]},
                                        "drift": {"type": "object"}, "applies": {}}}},
                                "objects": {"type": "array", "items": {"type": "object", "required": ["key", "change", "touched"],
                                    "properties": {"key": {"type": "object"},
                                        "change": {"type": "string", "enum": ["added", "changed", "removed"]},
                                        "touched": {"type": "boolean"}}}},
                                "left_open": {"type": "integer", "minimum": 0},
                                "drift_ids": {"type": "object", "additionalProperties": {"type": "integer"}},
                            }}},
                        "overwrites_live_changes": {"type": "boolean"},
                        "sure": {"type": "boolean"},
                        "reasons": {"type": "array", "items": {"type": "string"}},
                    }}),
                },
                bad_request(),
                write_refused(),
                write_disabled(),
                error(404, "no repository of that name"),
                error(501, "the service has no repositories to check a merge against"),
                error(502, "the cluster or the git server failed"),
                error(503, "the cluster or the store cannot be reached now"),
            ],
            handler: post(crate::check::check),
        },
        Endpoint {
            method: Method::POST,
            path: "/scan",
            operation_id: "triggerScan",
            summary: "Start a scan",
            description: "Starts a scan pass now. Needs `Authorization: Bearer <token>`; with no token configured \
                          the endpoint is disabled (403).",
            access: Access::Write,
            params: vec![query(
                "wait",
                "wait for the scan to finish and answer with its reports",
                json!({"type": "boolean", "default": false}),
            )],
            body: None,
            answers: vec![
                answer(200, "the scan finished (wait=true)", "ScanFinished"),
                answer(202, "the scan started", "ScanStarted"),
                bad_request(),
                write_refused(),
                write_disabled(),
                answer(409, "a scan is already running", "ScanConflict"),
                error(
                    503,
                    "no scan can be started now (shutting down, or this replica is a standby: the leader scans)",
                ),
            ],
            handler: post(handlers::scan),
        },
        Endpoint {
            method: Method::GET,
            path: "/drifts",
            operation_id: "listDrifts",
            summary: "List drifts",
            description: "Drifts newest first (descending id), filtered, one page at a time.",
            access: Access::Read,
            params: drifts_params,
            body: None,
            answers: vec![answer(200, "a page of drifts", "DriftPage"), bad_request(), read_refused(), store_down()],
            handler: get(handlers::drifts),
        },
        Endpoint {
            method: Method::GET,
            path: "/findings",
            operation_id: "listFindings",
            summary: "List policy findings",
            description: "Policy findings (`policy_violation`: a rule of docs/policies.md that failed on an \
                          object as Git declares it or as the cluster runs it), newest first (descending id), \
                          filtered, one page at a time. Apart from drifts: never listed by `/drifts`, never \
                          counted by `/stats`.",
            access: Access::Read,
            params: finding_params(),
            body: None,
            answers: vec![
                answer(200, "a page of findings", "FindingPage"),
                bad_request(),
                read_refused(),
                error(501, "the store keeps no policy findings"),
                store_down(),
            ],
            handler: get(handlers::findings),
        },
        Endpoint {
            method: Method::GET,
            path: "/drifts/{id}",
            operation_id: "getDrift",
            summary: "One drift",
            description: "The drift with this id, open, waived or resolved, with its decisions (oldest first), its \
                          notifications (newest first, at most 50) and what the decisions on similar drifts teach \
                          (`learned`), and what the classifier predicts the team will do (`prediction`: accept, \
                          revert or ignore, its confidence, its reasons, and whether the detector acts on it). \
                          The drift's own fields are at the top level, as `GET /drifts` lists them. \
                          With a store that keeps no decisions, the lists are empty and `learned` and \
                          `prediction` are null.",
            access: Access::Read,
            params: vec![drift_id_param()],
            body: None,
            answers: vec![
                answer(200, "the drift", "DriftDetail"),
                error(400, "the id is not an integer from 1 to 9223372036854775807"),
                read_refused(),
                error(404, "no drift with this id"),
                store_down(),
            ],
            handler: get(handlers::drift),
        },
        Endpoint {
            method: Method::POST,
            path: "/drifts/{id}/decisions",
            operation_id: "decide",
            summary: "Decide about a drift",
            description: "Records a human decision with a write token, whose name is the actor: `acknowledge` \
                          (someone is on it; reminders stop), `accept` (a waiver: the drift is `waived`, not counted \
                          as open, until `expires_at` — 7 days by default, 366 at most — or until its cluster value \
                          changes; needs a `comment`), `reject` (the change must be reverted; ends a waiver). \
                          Sets `decision_source` to `human`. See docs/decisions.md.",
            access: Access::Write,
            params: vec![drift_id_param()],
            body: Some(schema_ref("DecisionRequest")),
            answers: vec![
                answer(201, "the decision, as recorded", "Decision"),
                error(
                    400,
                    "the body is not a valid decision (unknown field, bad action, expiry in the past or more \
                            than 366 days away, accept without a comment), or a parameter is given",
                ),
                write_refused(),
                write_disabled(),
                error(404, "no drift with this id"),
                error(409, "the drift is resolved: nothing to decide"),
                error(413, "the body is larger than 2 MiB"),
                no_act(),
                store_down(),
            ],
            handler: post(acting::decide),
        },
        Endpoint {
            method: Method::POST,
            path: "/drifts/{id}/revert",
            operation_id: "revert",
            summary: "Revert a drift: the cluster back to Git",
            description: "With a write token (its name is recorded as who asked): reads the object from Git and \
                          from the cluster now, and sends a server-side apply of only the drifted field (field \
                          manager `drift-detector`) as a dry run, then for real when the dry run shows Git's value. \
                          `dry_run=true` stops after the dry run. The next scan or watch event resolves the drift as \
                          `reverted`. Refused (409, `refusal` names the rule): resolved drifts, drifts under a \
                          waiver, missing objects (a sync, not a patch), Secrets unless allowed, fields a \
                          controller owns, a dry run that does not show the change. See docs/remediation.md.",
            access: Access::Write,
            params: vec![
                drift_id_param(),
                query(
                    "dry_run",
                    "only the server's dry run; nothing changes (default false)",
                    json!({"type": "boolean"}),
                ),
            ],
            body: None,
            answers: vec![
                answer(200, "what was sent (the plan is left out for a Secret)", "RevertOutcome"),
                error(400, "a parameter is malformed or unknown"),
                write_refused(),
                write_disabled(),
                error(404, "no drift with this id"),
                refusal(409, "a safety rule refused the revert"),
                error(
                    501,
                    "this service does not remediate (no cluster writer or no audit trail); `refusal: not_configured` \
                     when it does but not this drift",
                ),
                error(502, "the cluster did not accept the request"),
            ],
            handler: post(remediation::revert),
        },
        Endpoint {
            method: Method::POST,
            path: "/drifts/{id}/accept",
            operation_id: "accept",
            summary: "Accept a drift into Git: a pull request",
            description: "With a write token: places the cluster's value of the field (and of the other accepted \
                          drifts of the same object that are still live) in the desired source — in place in a \
                          plain manifest, in the Kustomize overlay, in the Helm values key — and opens a pull \
                          request on GitHub or pushes a branch elsewhere; a second request updates the same pull \
                          request. After the merge, the next scan resolves the drift as `accepted`. Refused \
                          (409): resolved drifts, Secrets, missing objects, changes that cannot be placed (the \
                          answer says what to put where). See docs/remediation.md.",
            access: Access::Write,
            params: vec![drift_id_param()],
            body: None,
            answers: vec![
                answer(200, "the proposal", "AcceptOutcome"),
                error(400, "a parameter is given"),
                write_refused(),
                write_disabled(),
                error(404, "no drift with this id"),
                refusal(409, "a safety rule refused the change"),
                error(
                    501,
                    "this service does not remediate (no cluster writer or no audit trail), or no pull requests \
                     are configured for the drift's repository (`refusal: not_configured`)",
                ),
                error(502, "the git server did not accept the change"),
            ],
            handler: post(remediation::accept),
        },
        Endpoint {
            method: Method::GET,
            path: "/audit",
            operation_id: "listAudit",
            summary: "The audit trail",
            description: "What happened, newest first: scans recorded, decisions, waivers that ended, every \
                          notification attempt with its status, attempts and error, requeues. Never a secret.",
            access: Access::Read,
            params: audit_params,
            body: None,
            answers: vec![
                answer(200, "a page of the audit trail", "AuditPage"),
                bad_request(),
                read_refused(),
                no_act(),
                store_down(),
            ],
            handler: get(acting::audit),
        },
        Endpoint {
            method: Method::GET,
            path: "/notifications",
            operation_id: "listNotifications",
            summary: "Deliveries to notifiers",
            description: "Deliveries of events to notifiers, newest event first: pending ones (with their \
                          attempts, last error and since when they fail), sent, skipped and parked ones with why \
                          (`park_reason`: `outage` when the receiver failed for longer than the notifier retries, \
                          probed and back in the queue as soon as it answers; `refused` when it refused the \
                          message, kept until requeued).",
            access: Access::Read,
            params: notification_params,
            body: None,
            answers: vec![
                answer(200, "a page of deliveries", "DeliveryPage"),
                bad_request(),
                read_refused(),
                no_act(),
                store_down(),
            ],
            handler: get(acting::notifications),
        },
        Endpoint {
            method: Method::POST,
            path: "/notifications/{event_id}/requeue",
            operation_id: "requeueNotification",
            summary: "Requeue a parked delivery",
            description: "Puts a parked delivery of an event to a notifier back in the queue, due now, with its \
                          attempts reset; the audit trail records it with the token's name.",
            access: Access::Write,
            params: vec![
                Param {
                    name: "event_id",
                    location: "path",
                    required: true,
                    description: "the event's id (its idempotency key)",
                    schema: json!({"type": "string", "minLength": 1}),
                },
                Param {
                    name: "notifier",
                    location: "query",
                    required: true,
                    description: "the notifier's name",
                    schema: json!({"type": "string", "minLength": 1}),
                },
            ],
            body: None,
            answers: vec![
                answer(200, "the delivery is pending again", "Requeued"),
                bad_request(),
                write_refused(),
                write_disabled(),
                error(404, "no parked delivery of this event to this notifier"),
                no_act(),
                store_down(),
            ],
            handler: post(acting::requeue),
        },
        Endpoint {
            method: Method::GET,
            path: "/stats",
            operation_id: "stats",
            summary: "Statistics",
            description: "Counts by status; open drifts by severity, type, namespace and repository; a 7-day \
                          trend ending today (UTC); mean and 95th percentile time to resolve.",
            access: Access::Read,
            params: filter_params(),
            body: None,
            answers: vec![answer(200, "the statistics", "DriftStats"), bad_request(), read_refused(), store_down()],
            handler: get(handlers::stats),
        },
        Endpoint {
            method: Method::GET,
            path: "/scans",
            operation_id: "listScans",
            summary: "The last scans",
            description: "The most recent scans recorded, newest first (by start time): cluster, repository, \
                          revision, outcome, drifts and warnings, and the coverage gaps of each — the kinds and \
                          namespaces the live source could not read completely (forbidden, not served, failed), \
                          where drifts were neither found nor resolved.",
            access: Access::Read,
            params: vec![query(
                "limit",
                "how many scans",
                json!({"type": "integer", "minimum": 1, "maximum": handlers::MAX_SCANS, "default": handlers::DEFAULT_SCANS}),
            )],
            body: None,
            answers: vec![answer(200, "the last scans", "ScanList"), bad_request(), read_refused(), store_down()],
            handler: get(handlers::scans),
        },
        Endpoint {
            method: Method::GET,
            path: "/metrics",
            operation_id: "metrics",
            summary: "Prometheus metrics",
            description: "OpenMetrics text. Open-drift gauges are read from the store at scrape time.",
            access: Access::Open,
            params: vec![],
            body: None,
            answers: vec![Answer {
                status: 200,
                description: "the metrics",
                content_type: "application/openmetrics-text",
                schema: json!({"type": "string"}),
            }],
            handler: get(handlers::metrics),
        },
        Endpoint {
            method: Method::GET,
            path: "/openapi.json",
            operation_id: "openapi",
            summary: "This document",
            description: "The OpenAPI 3.1 document of the API, generated from the route table.",
            access: Access::Read,
            params: vec![],
            body: None,
            answers: vec![
                Answer {
                    status: 200,
                    description: "the OpenAPI document",
                    content_type: JSON,
                    schema: json!({"type": "object"}),
                },
                read_refused(),
            ],
            handler: get(handlers::openapi),
        },
    ]
}

/// The API as a router, ready for [`crate::server::serve`] (or `axum::serve`, without its bounds). Unknown paths answer 404 and unknown methods
/// 405, a URI or headers too large 414 or 431 ([`crate::limits`]), a `Host` the state does not
/// allow 421 ([`crate::server::AllowedHosts`]), all as JSON. Every request is logged through `tracing` (method, path, status, time;
/// never headers nor the query string): at `debug`, or `warn` for a 5xx.
///
/// The web page ([`crate::ui`]) is served at `/` and `/ui/{file}`, outside the route table: it
/// is not part of the JSON API and needs no token (it holds no data).
///
/// Endpoints of [`Access::Read`] pass the read-token check first; those of [`Access::Write`]
/// authenticate in their handler (the [`crate::auth::Actor`] extractor).
pub fn router(state: ApiState) -> Router {
    let mut router = Router::new();
    for endpoint in endpoints() {
        let mut handler = endpoint.handler;
        if endpoint.access == Access::Read {
            handler = handler.route_layer(middleware::from_fn_with_state(state.clone(), require_read));
        }
        router = router.route(endpoint.path, handler.fallback(handlers::method_not_allowed));
    }
    router
        .route("/", get(crate::ui::index).fallback(handlers::method_not_allowed))
        .route("/ui/{file}", get(crate::ui::asset).fallback(handlers::method_not_allowed))
        .fallback(handlers::not_found)
        .layer(middleware::from_fn(crate::limits::enforce))
        .layer(middleware::from_fn_with_state(state.clone(), check_host))
        .layer(middleware::from_fn(log_request))
        .with_state(state)
}

/// 421 for a request to a host name the server does not answer to ([`crate::server::AllowedHosts`]).
async fn check_host(State(state): State<ApiState>, request: Request, next: Next) -> Response {
    match state.hosts.check(&request) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

async fn require_read(State(state): State<ApiState>, request: Request, next: Next) -> Response {
    let what = format!("{} {}", request.method(), request.uri().path());
    match crate::auth::check_read(&state, request.headers(), &what) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

async fn log_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let started = std::time::Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    if response.status().is_server_error() {
        tracing::warn!(%method, path, status, elapsed_ms, "request failed");
    } else {
        tracing::debug!(%method, path, status, elapsed_ms, "request");
    }
    response
}
