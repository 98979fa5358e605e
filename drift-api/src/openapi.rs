//! The OpenAPI 3.1 document, built from [`crate::routes::endpoints`] and the component schemas
//! below. Enumerations come from the core types (`DriftType::ALL`, `Severity::ALL`); the tests
//! check that every schema lists exactly the fields the types serialise.

use serde_json::{Map, Value, json};

use crate::routes::{Access, endpoints};

/// The document served at `GET /openapi.json`.
pub fn document() -> Value {
    let mut paths = Map::new();
    for e in endpoints() {
        let params: Vec<Value> = e
            .params
            .iter()
            .map(|p| {
                json!({"name": p.name, "in": p.location, "required": p.required,
                       "description": p.description, "schema": p.schema})
            })
            .collect();
        let mut responses = Map::new();
        for a in &e.answers {
            responses.insert(
                a.status.to_string(),
                json!({"description": a.description, "content": {a.content_type: {"schema": a.schema}}}),
            );
        }
        // Every route: a `Host` the server does not answer to (crate::server::AllowedHosts).
        responses.insert(
            "421".to_owned(),
            json!({"description": "the Host header (or the absolute request target) names a host this server does not \
                                   answer to (api.allowed_hosts)",
                   "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}),
        );
        let mut op = json!({
            "operationId": e.operation_id,
            "summary": e.summary,
            "description": e.description,
            "parameters": params,
            "responses": responses,
        });
        match e.access {
            Access::Open => {}
            // The bearer token is needed only when a read token is configured.
            Access::Read => op["security"] = json!([{}, {"bearer": []}]),
            Access::Write => op["security"] = json!([{"bearer": []}]),
        }
        if let Some(body) = &e.body {
            op["requestBody"] = json!({"required": true, "content": {"application/json": {"schema": body}}});
        }
        let item = paths.entry(e.path.to_owned()).or_insert_with(|| json!({}));
        item[e.method.as_str().to_ascii_lowercase()] = op;
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "drift",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "GitOps drift detector for Kubernetes: drifts between Git and the cluster, scans, \
                            statistics and metrics, decisions and waivers, notifications and the audit trail. \
                            Errors are JSON {\"error\": \"message\"}.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas(),
        },
    })
}

/// A pattern matching a string with a visible character: one outside
/// [`drift_model::decision::INVISIBLE`] (white space, controls, zero-width and other characters
/// that show nothing), what [`drift_model::decision::has_visible_text`] asks of a waiver's
/// comment; spelt out since `\s` means other sets in other regex engines.
fn not_blank() -> String {
    let class: String = drift_model::decision::INVISIBLE
        .iter()
        .map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") })
        .collect();
    format!("[^{class}]")
}

fn nullable(t: &str) -> Value {
    json!({"type": [t, "null"]})
}

fn nullable_time() -> Value {
    json!({"type": ["string", "null"], "format": "date-time"})
}

fn enum_of<'a>(values: impl IntoIterator<Item = &'a str>) -> Value {
    json!({"type": "string", "enum": values.into_iter().collect::<Vec<_>>()})
}

fn counts() -> Value {
    json!({"type": "object", "additionalProperties": {"type": "integer"}})
}

fn object(required: &[&str], properties: Value) -> Value {
    json!({"type": "object", "required": required, "properties": properties})
}

fn schemas() -> Value {
    use drift_model::act::{AuditAction, DecisionAction, DeliveryStatus, EventKind};
    use drift_model::{Classification, DecisionSource, DriftType, RecommendedAction, ScanOutcome, Severity};
    let severity = enum_of(Severity::ALL.map(Severity::as_str));
    let revert_ref = json!({"$ref": "#/components/schemas/Revert"});
    let refusals = drift_model::remedy::Refusal::ALL.map(drift_model::remedy::Refusal::as_str);
    let drift_type = enum_of(DriftType::ALL.map(DriftType::as_str));
    let classification = enum_of(
        [
            Classification::ManualChange,
            Classification::ControllerManaged,
            Classification::PendingSync,
            Classification::Unknown,
        ]
        .map(Classification::as_str),
    );
    let decision =
        enum_of([DecisionSource::Scanner, DecisionSource::Human, DecisionSource::Ai].map(DecisionSource::as_str));
    let action = enum_of(
        [RecommendedAction::Observe, RecommendedAction::SuggestRevert, RecommendedAction::CreatePr]
            .map(RecommendedAction::as_str),
    );
    let outcome = enum_of([ScanOutcome::Success, ScanOutcome::Partial, ScanOutcome::Failed].map(ScanOutcome::as_str));
    let time = json!({"type": "string", "format": "date-time"});
    let any = json!({});
    let waiver = object(
        &["path", "owner", "reason", "expires_at"],
        json!({
            "path": {"type": "string"}, "owner": {"type": "string"}, "reason": {"type": "string"},
            "expires_at": {"type": "string", "format": "date-time"},
        }),
    );
    let stored_fields = [
        "id",
        "fingerprint",
        "detected_at",
        "last_seen",
        "occurrences",
        "cluster",
        "repository",
        "api_group",
        "resource_kind",
        "namespace",
        "resource_name",
        "path",
        "drift_type",
        "severity",
        "git_value",
        "cluster_value",
        "status",
        "resolved_at",
        "resolution",
        "changed_by",
        "changed_at",
        "changed_by_user",
        "classification",
        "decision_source",
        "recommended_action",
        "waived_until",
        "waived_by",
        "acknowledged_at",
    ];
    let stored_properties = json!({
            "id": {"type": "integer"},
            "fingerprint": {"type": "string", "description": "SHA-256 of the drift's identity"},
            "detected_at": time, "last_seen": time,
            "occurrences": {"type": "integer", "minimum": 1},
            "cluster": {"type": "string"}, "repository": {"type": "string"},
            "api_group": {"type": "string", "description": "empty for the core group"},
            "resource_kind": {"type": "string"},
            "namespace": {"type": "string", "description": "empty for cluster-scoped objects"},
            "resource_name": {"type": "string"},
            "path": {"type": "string", "description": "dotted path, keyed list items in brackets"},
            "drift_type": drift_type, "severity": severity,
            "git_value": any, "cluster_value": any,
            "status": {"type": "string", "enum": ["open", "waived", "resolved"],
                "description": "waived: still seen, under a waiver (an accept decision), not counted as open"},
            "resolved_at": nullable_time(),
            "resolution": {"type": ["string", "null"], "enum": ["reverted", "accepted", "removed", null],
                "description": "how a resolved drift went away: the cluster was put back (reverted), Git took the change (accepted), the object is gone: Git no longer holds it or it was deleted from the cluster (removed); null while open"},
            "changed_by": nullable("string"), "changed_at": nullable_time(),
            "changed_by_user": {"oneOf": [{"$ref": "#/components/schemas/ChangeIdentity"}, {"type": "null"}],
                "description": "who sent the change changed_by names, from the Kubernetes audit log; null until joined or when no audit event matched"},
            "classification": classification, "decision_source": decision, "recommended_action": action,
            "waived_until": {"type": ["string", "null"], "format": "date-time",
                "description": "when the waiver of a waived drift ends"},
            "waived_by": {"type": ["string", "null"],
                "description": "who waived it: the token or CLI user of the accept decision, git:<owner> for a waiver in Git"},
            "acknowledged_at": {"type": ["string", "null"], "format": "date-time",
                "description": "when someone acknowledged the drift (reminders stop)"},
            "revert": {"$ref": "#/components/schemas/Revert"},
    });
    let decision_action = enum_of(
        [DecisionAction::Acknowledge, DecisionAction::Accept, DecisionAction::Reject].map(DecisionAction::as_str),
    );
    let mut detail_properties = stored_properties.clone();
    detail_properties["decisions"] = json!({"type": "array", "items": {"$ref": "#/components/schemas/Decision"},
        "description": "oldest first"});
    detail_properties["notifications"] = json!({"type": "array", "items": {"$ref": "#/components/schemas/DeliveryRecord"},
        "description": "newest first, at most 50"});
    detail_properties["learned"] = json!({"oneOf": [{"$ref": "#/components/schemas/Learned"}, {"type": "null"}],
        "description": "what decisions on similar drifts teach; null with none"});
    detail_properties["prediction"] = json!({"oneOf": [{"$ref": "#/components/schemas/Prediction"}, {"type": "null"}],
        "description": "what the classifier predicts the team will do, its own decisions left out; null before any decision"});
    let mut detail_fields = stored_fields.to_vec();
    detail_fields.extend(["decisions", "notifications", "learned", "prediction"]);
    let prediction = object(
        &["intent", "confidence", "probabilities", "reasons", "examples", "min_confidence", "used", "explanation"],
        json!({
            "intent": {"type": "string", "enum": ["accept", "revert", "ignore"]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1, "description": "the probability of the intent"},
            "probabilities": object(&["accept", "revert", "ignore"], json!({
                "accept": {"type": "number", "minimum": 0, "maximum": 1},
                "revert": {"type": "number", "minimum": 0, "maximum": 1},
                "ignore": {"type": "number", "minimum": 0, "maximum": 1},
            })),
            "reasons": {"type": "array", "maxItems": 3, "description": "the evidence, strongest first",
                "items": object(&["feature", "value", "seen", "agreeing", "text"], json!({
                    "feature": {"type": "string"}, "value": {"type": "string"},
                    "seen": {"type": "integer", "minimum": 0}, "agreeing": {"type": "integer", "minimum": 0},
                    "text": {"type": "string", "description": "field manager kubectl-scale: 18 of 20 such decisions were accept"},
                }))},
            "examples": {"type": "integer", "minimum": 0, "description": "decided drifts the model learned from"},
            "min_confidence": {"type": ["number", "null"], "minimum": 0, "maximum": 1,
                "description": "classify.min_confidence; null when classify: is not configured"},
            "used": {"type": "boolean", "description": "whether the detector acts on it (routing, automatic pull requests, whitelist proposals)"},
            "explanation": {"type": "string"},
        }),
    );
    let mut schemas = json!({
        "Error": object(&["error"], json!({"error": {"type": "string"}})),
        "Health": object(&["status"], json!({"status": {"type": "string", "enum": ["ok"]}})),
        "Ready": object(&["status", "scans"], json!({
            "status": {"type": "string", "enum": ["ready", "not_ready"]},
            "store": {"type": "string", "enum": ["ok"]},
            "error": {"type": "string", "description": "why the service is not ready"},
            "leader": {"type": "boolean", "description": "whether this replica runs the scans (holds the leader lease, or leader election is off)"},
            "degraded": {"type": "array", "description": "with several clusters, those whose last scan failed or whose watch lost sync while another is fine (the service stays ready)",
                "items": object(&["cluster", "reason"], json!({"cluster": {"type": "string"}, "reason": {"type": "string"}}))},
            "scans": {"type": "array", "items": object(
                &["cluster", "repository", "scan_id", "outcome", "finished_at", "age_seconds"],
                json!({
                    "cluster": {"type": "string"}, "repository": {"type": "string"},
                    "scan_id": {"type": "string"}, "outcome": outcome, "finished_at": time,
                    "age_seconds": {"type": "integer", "minimum": 0},
                }),
            )},
        })),
        "Revert": object(&["patch", "command"], json!({
            "patch": {"type": "array", "description": "RFC 6902 operations on the live object that restore Git's value, each change after a test of the value it replaces",
                "items": object(&["op", "path"], json!({
                    "op": {"type": "string", "enum": ["add", "remove", "replace", "test"]},
                    "path": {"type": "string", "description": "JSON pointer (RFC 6901)"},
                    "value": {},
                }))},
            "command": {"type": "string", "description": "the kubectl patch command that sends the patch (field manager drift-detector)"},
        })),
        "Refused": object(&["error", "refusal"], json!({
            "error": {"type": "string", "description": "a sentence naming the drift and the rule"},
            "refusal": {"type": "string", "enum": refusals},
            "planned": {"description": "`stale`: the value the revert was planned against (the drift's cluster value, or the value the actor's last dry run showed), or for an accept the drift's recorded cluster value; null when the field was absent"},
            "found": {"description": "`stale`: the value the cluster holds now, which was left in place (not reverted, not proposed); null when the field is gone"},
            "changed": {"type": "array", "items": {"type": "string"},
                "description": "`concurrent_change`: JSON pointers of what others changed in the object while the revert read and wrote it"},
        })),
        "RevertOutcome": object(&["drift_id", "status", "object", "paths", "actor"], json!({
            "drift_id": {"type": "integer"},
            "status": {"type": "string", "enum": ["reverted", "dry_run"]},
            "object": {"type": "string", "description": "group/kind namespace/name"},
            "paths": {"type": "array", "items": {"type": "string"}},
            "plan": {"type": "object", "description": "what was sent: the server-side apply body (`apply`), the guarded removals (`remove`, RFC 6902) and the object's `resource_version` the write was conditional on; absent for a Secret"},
            "replaced": {"description": "the cluster's value the revert replaced (a dry run: would replace); null when the cluster lacked the field; absent for a Secret"},
            "written": {"description": "Git's value the revert wrote (a dry run: would write); null when the field was removed; absent for a Secret"},
            "actor": {"type": "string", "description": "who asked; for an answer with `earlier`, who made that revert"},
            "earlier": {"type": "integer", "description": "a retry whose revert was done already (its first answer lost, or the drift resolved as reverted): the audit entry of that revert; nothing was written"},
        })),
        "AcceptOutcome": object(&["drift_ids", "object", "proposal", "actor"], json!({
            "drift_ids": {"type": "array", "items": {"type": "integer"}, "description": "the drifts the change covers"},
            "object": {"type": "string"},
            "proposal": object(&["branch", "updated", "placed", "unplaced"], json!({
                "url": {"type": ["string", "null"], "description": "the pull request, or the compare address of the branch"},
                "pull_request": {"type": "integer"},
                "branch": {"type": "string"},
                "updated": {"type": "boolean", "description": "an open pull request of the object was updated"},
                "placed": {"type": "array", "items": {"type": "string"}},
                "unplaced": {"type": "array", "items": {"type": "string"}},
            })),
            "actor": {"type": "string"},
        })),
        "StoredDrift": object(&stored_fields, stored_properties),
        "DriftDetail": object(&detail_fields, detail_properties),
        "Learned": object(&["accepted", "rejected", "intentional", "explanation"], json!({
            "accepted": {"type": "integer", "minimum": 0, "description": "similar drifts whose last decision was accept"},
            "rejected": {"type": "integer", "minimum": 0, "description": "similar drifts whose last decision was reject"},
            "intentional": {"type": "number", "minimum": 0, "maximum": 1,
                "description": "(accepted + 1) / (accepted + rejected + 2)"},
            "explanation": {"type": "string", "description": "likely intentional (79%, 10 of 12 similar changes accepted)"},
        })),
        "DecisionRequest": {
            "type": "object", "required": ["action"], "additionalProperties": false,
            "properties": {
                "action": decision_action,
                "comment": {"type": ["string", "null"], "maxLength": 2000, "description": "why; required for accept"},
                "expires_at": {"type": ["string", "null"], "format": "date-time",
                    "description": "when a waiver ends, in the future: 7 days without one, 366 days at most; accept only"},
            },
            // An accept needs a comment with a visible character (not only white space,
            // controls or zero-width characters); the other actions take no expiry.
            "allOf": [{
                "if": {"properties": {"action": {"const": "accept"}}},
                "then": {"required": ["comment"], "properties": {"comment": {"type": "string", "pattern": not_blank()}}},
                "else": {"properties": {"expires_at": {"type": "null"}}},
            }],
        },
        "Decision": object(&["id", "drift_id", "action", "comment", "actor", "decided_at", "expires_at"], json!({
            "id": {"type": "integer"}, "drift_id": {"type": "integer"}, "action": decision_action,
            "comment": nullable("string"),
            "actor": {"type": "string", "description": "the write token's name, or the CLI user"},
            "decided_at": time, "expires_at": nullable_time(),
        })),
        "DeliveryRecord": object(
            &[
                "seq",
                "event_id",
                "kind",
                "drift_id",
                "notifier",
                "status",
                "attempts",
                "due_at",
                "last_error",
                "sent_at",
                "failing_since",
                "park_reason",
            ],
            json!({
                "seq": {"type": "integer", "description": "the event's position in the outbox"},
                "event_id": {"type": "string", "description": "the event's stable id, its idempotency key"},
                "kind": enum_of(EventKind::ALL.map(EventKind::as_str)),
                "drift_id": nullable("integer"),
                "notifier": {"type": "string"},
                "status": enum_of(DeliveryStatus::ALL.map(DeliveryStatus::as_str)),
                "attempts": {"type": "integer", "minimum": 0},
                "due_at": time,
                "last_error": {"type": ["string", "null"], "description": "the last failure, or why it was skipped"},
                "sent_at": nullable_time(),
                "failing_since": {"type": ["string", "null"], "format": "date-time",
                    "description": "since when its attempts fail (retry_for counts from here); null once sent or requeued"},
                "park_reason": {"type": ["string", "null"], "enum": ["outage", "refused", null],
                    "description": "why it is parked: outage (failing for longer than retry_for; probed, and back in the \
                                    queue as soon as the receiver takes a message) or refused (a failure that will not \
                                    pass; requeue it)"},
            }),
        ),
        "DeliveryPage": object(&["items", "next"], json!({
            "items": {"type": "array", "items": {"$ref": "#/components/schemas/DeliveryRecord"}},
            "next": {"type": ["integer", "null"], "description": "cursor of the next page (`after`), null on the last page"},
        })),
        "AuditEntry": object(
            &["id", "at", "action", "actor", "drift_id", "scan_id", "notifier", "event_id", "status", "attempts", "detail", "attempt"],
            json!({
                "id": {"type": "integer"}, "at": time,
                "action": enum_of(AuditAction::ALL.map(AuditAction::as_str)),
                "actor": {"type": "string", "description": "a token's name, a CLI user, scanner, or notifier:NAME"},
                "drift_id": nullable("integer"), "scan_id": nullable("string"),
                "notifier": nullable("string"), "event_id": nullable("string"),
                "status": {"type": "string", "description": "a decision's action, a delivery's status, a scan's outcome; for a revert or an accept: `attempted` before it acts, then its outcome (`interrupted` when its process stopped first)"},
                "attempts": nullable("integer"),
                "detail": {"type": "object", "description": "comment, expiry, error, counts; never a secret"},
                "attempt": {"type": ["integer", "null"], "description": "the outcome of a revert or an accept: the id of the `attempted` entry it wrote before it acted"},
            }),
        ),
        "AuditPage": object(&["items", "next"], json!({
            "items": {"type": "array", "items": {"$ref": "#/components/schemas/AuditEntry"}},
            "next": {"type": ["integer", "null"], "description": "cursor of the next page (`after`), null on the last page"},
        })),
        "Requeued": object(&["status", "event_id", "notifier"], json!({
            "status": {"type": "string", "enum": ["pending"]},
            "event_id": {"type": "string"}, "notifier": {"type": "string"},
        })),
        "DriftPage": object(&["items", "next"], json!({
            "items": {"type": "array", "items": {"$ref": "#/components/schemas/StoredDrift"}},
            "next": {"type": ["integer", "null"], "description": "cursor of the next page (`after`), null on the last page"},
        })),
        "TrendDay": object(&["day", "new", "resolved"], json!({
            "day": {"type": "string", "format": "date"},
            "new": {"type": "integer"}, "resolved": {"type": "integer"},
        })),
        "DriftStats": object(
            &["by_status", "by_severity", "by_type", "by_namespace", "by_repository", "trend",
              "mean_time_to_resolve_seconds", "p95_time_to_resolve_seconds"],
            json!({
                "by_status": counts(), "by_severity": counts(), "by_type": counts(),
                "by_namespace": counts(), "by_repository": counts(),
                "trend": {"type": "array", "items": {"$ref": "#/components/schemas/TrendDay"}},
                "mean_time_to_resolve_seconds": nullable("number"),
                "p95_time_to_resolve_seconds": nullable("number"),
                "by_cluster": {
                    "type": "array",
                    "description": "the fleet overview: open drifts per cluster, worst first (most CRITICAL, then HIGH, then open); absent when nothing is open",
                    "items": {"$ref": "#/components/schemas/ClusterOpen"},
                },
            }),
        ),
        "ClusterOpen": object(&["cluster", "open", "by_severity", "by_namespace"], json!({
            "cluster": {"type": "string"}, "open": {"type": "integer"},
            "by_severity": counts(), "by_namespace": counts(),
        })),
        "ScanStarted": object(&["status", "scan_id"], json!({
            "status": {"type": "string", "enum": ["started"]}, "scan_id": {"type": "string"},
        })),
        "ScanConflict": object(&["error", "scan_id"], json!({
            "error": {"type": "string"}, "scan_id": nullable("string"),
        })),
        "ScanFinished": object(&["status", "scan_id", "reports"], json!({
            "status": {"type": "string", "enum": ["finished"]}, "scan_id": {"type": "string"},
            "reports": {"type": "array", "items": {"$ref": "#/components/schemas/ScanReport"}},
        })),
        "ScanReport": object(
            &["scan_id", "cluster", "repository", "revision", "started_at", "finished_at", "outcome", "drifts",
              "coverage", "warnings", "desired", "desired_digests", "desired_complete", "summary"],
            json!({
                "scan_id": {"type": "string"}, "cluster": {"type": "string"}, "repository": {"type": "string"},
                "revision": nullable("string"), "started_at": time, "finished_at": time, "outcome": outcome,
                "drifts": {"type": "array", "items": {"$ref": "#/components/schemas/Drift"}},
                "coverage": {"type": "object", "description": "what the live source read completely"},
                "warnings": {"type": "array", "items": {"type": "object"}},
                "desired": {"type": "array", "items": {"type": "object"}},
                "desired_digests": {"type": "array", "items": {"type": "string"},
                    "description": "digest of each object of `desired`, same order; empty when unknown"},
                "desired_complete": {"type": "boolean"},
                "summary": {"type": "object"},
            }),
        ),
        "Drift": object(
            &["resource", "api_group", "drift_type", "severity", "path", "git_value", "cluster_value",
              "changed_by", "changed_at", "classification", "decision_source", "recommended_action"],
            json!({
                "resource": object(&["apiVersion", "kind", "name"], json!({
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                    "namespace": {"type": "string"}, "name": {"type": "string"},
                })),
                "api_group": {"type": "string"}, "drift_type": drift_type, "severity": severity,
                "path": {"type": "string"}, "git_value": any, "cluster_value": any,
                "changed_by": nullable("string"), "changed_at": nullable_time(),
                "attribution": {"type": "object"},
                "classification": classification, "decision_source": decision, "recommended_action": action,
                "source_path": {"type": "string"},
                "waiver": waiver,
            }),
        ),
    });
    schemas["Drift"]["properties"]["revert"] = revert_ref;
    schemas["Prediction"] = prediction;
    schemas["ChangeIdentity"] = object(
        &["username", "groups", "source_ips", "user_agent", "verb", "audit_id", "request_time", "changed_at"],
        json!({
            "username": {"type": "string", "description": "the authenticated user of the request"},
            "groups": {"type": "array", "items": {"type": "string"}},
            "source_ips": {"type": "array", "items": {"type": "string"},
                "description": "the client's address first, then proxies', as the API server saw them"},
            "user_agent": {"type": ["string", "null"], "description": "as the client sent it (not proof)"},
            "verb": {"type": "string", "description": "update, patch or create"},
            "audit_id": {"type": "string", "description": "the audit event's auditID"},
            "request_time": time,
            "changed_at": {"type": "string", "format": "date-time",
                "description": "the drift's changed_at this identity was joined for"},
        }),
    );
    for (name, schema) in finding_schemas(&severity, &time) {
        schemas[name] = schema;
    }
    schemas["ScanReport"]["properties"]["findings"] = json!({"type": "array", "items": {"$ref": "#/components/schemas/Finding"},
        "description": "policy findings of the scan (absent when none); not drifts"});
    schemas["ScanReport"]["properties"]["policy_sides"] = json!({"type": "array", "items": enum_of(drift_model::finding::Side::ALL.map(drift_model::finding::Side::as_str)),
        "description": "the sides policies were checked on (absent when they were not)"});
    for (name, schema) in scan_schemas(&outcome, &time) {
        schemas[name] = schema;
    }
    schemas
}

/// The schemas of policy findings: in a report, and as `GET /findings` lists them.
fn finding_schemas(severity: &Value, time: &Value) -> [(&'static str, Value); 3] {
    use drift_model::finding::{Rule, Side};
    let rule = enum_of(Rule::ALL.map(Rule::as_str));
    let side = enum_of(Side::ALL.map(Side::as_str));
    let finding_type = enum_of(["policy_violation"]);
    let path = json!({"type": "string", "description": "JSON pointer (RFC 6901) of the offending field, or of where it is missing"});
    let finding = object(
        &["resource", "side", "rule", "path", "finding_type", "severity", "message"],
        json!({
            "resource": object(&["group", "kind", "namespace", "name"], json!({
                "group": {"type": "string"}, "kind": {"type": "string"},
                "namespace": {"type": ["string", "null"]}, "name": {"type": "string"},
            })),
            "side": side, "rule": rule, "path": path,
            "container": {"type": "string", "description": "the container, for the container rules"},
            "finding_type": finding_type, "severity": severity, "message": {"type": "string"},
        }),
    );
    let stored = object(
        &[
            "id",
            "fingerprint",
            "finding_type",
            "detected_at",
            "last_seen",
            "occurrences",
            "cluster",
            "repository",
            "rule",
            "severity",
            "side",
            "api_group",
            "resource_kind",
            "namespace",
            "resource_name",
            "container",
            "path",
            "message",
            "status",
            "resolved_at",
        ],
        json!({
            "id": {"type": "integer"},
            "fingerprint": {"type": "string", "description": "SHA-256 of the finding's identity"},
            "finding_type": finding_type,
            "detected_at": time, "last_seen": time,
            "occurrences": {"type": "integer", "minimum": 1},
            "cluster": {"type": "string"}, "repository": {"type": "string"},
            "rule": rule, "severity": severity, "side": side,
            "api_group": {"type": "string", "description": "empty for the core group"},
            "resource_kind": {"type": "string"},
            "namespace": {"type": "string", "description": "empty for cluster-scoped objects"},
            "resource_name": {"type": "string"},
            "container": {"type": ["string", "null"], "description": "the container, for the container rules"},
            "path": path, "message": {"type": "string"},
            "status": {"type": "string", "enum": ["open", "resolved"]},
            "resolved_at": nullable_time(),
        }),
    );
    let page = object(
        &["items", "next"],
        json!({
            "items": {"type": "array", "items": {"$ref": "#/components/schemas/StoredFinding"}},
            "next": {"type": ["integer", "null"], "description": "cursor of the next page (`after`), null on the last page"},
        }),
    );
    [("Finding", finding), ("StoredFinding", stored), ("FindingPage", page)]
}

/// The schemas of `GET /scans`.
fn scan_schemas(outcome: &Value, time: &Value) -> [(&'static str, Value); 2] {
    let gap = object(
        &["group", "kind", "namespace", "status"],
        json!({
            "group": {"type": "string", "description": "API group; empty for the core group"},
            "kind": {"type": "string"},
            "namespace": {"type": ["string", "null"], "description": "null for cluster-scoped kinds"},
            "status": {"type": "string", "enum": ["forbidden", "not_served", "failed"]},
            "message": {"type": "string", "description": "why"},
        }),
    );
    let record = object(
        &[
            "scan_id",
            "cluster",
            "repository",
            "revision",
            "started_at",
            "finished_at",
            "outcome",
            "drifts",
            "warnings",
            "coverage_gaps",
        ],
        json!({
            "scan_id": {"type": "string"}, "cluster": {"type": "string"}, "repository": {"type": "string"},
            "revision": {"type": ["string", "null"], "description": "the Git commit scanned"},
            "started_at": time, "finished_at": time, "outcome": outcome,
            "drifts": {"type": "integer", "minimum": 0, "description": "drifts in the report"},
            "warnings": {"type": "integer", "minimum": 0, "description": "warnings in the report"},
            "coverage_gaps": {"type": "array", "items": gap,
                "description": "what the live source could not read completely: drifts there were neither found nor resolved"},
        }),
    );
    let list = object(
        &["items"],
        json!({"items": {"type": "array", "items": {"$ref": "#/components/schemas/ScanRecord"}, "description": "newest first"}}),
    );
    [("ScanList", list), ("ScanRecord", record)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_comment_pattern_excludes_exactly_the_invisible_characters() {
        let ranges = drift_model::decision::INVISIBLE;
        let class = not_blank();
        let inner = class.strip_prefix("[^").and_then(|c| c.strip_suffix(']')).unwrap();
        let chars: Vec<char> = inner.chars().collect();
        let singles = ranges.iter().filter(|(a, b)| a == b).count();
        assert_eq!(chars.len(), singles + 3 * (ranges.len() - singles), "{class:?}");
        assert_eq!(chars.iter().filter(|c| **c == '-').count(), ranges.len() - singles);
        // Every White_Space character (what `trim` removes) is among them.
        for c in (0..=0x10ffff).filter_map(char::from_u32).filter(|c| c.is_whitespace()) {
            assert!(ranges.iter().any(|&(a, b)| (a..=b).contains(&c)), "U+{:04X}", c as u32);
        }
    }
}
