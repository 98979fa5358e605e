//! `POST /check?ref=REF[&repository=NAME]`: what merging a branch would do to the cluster, the
//! answer of `drift check --ref` (docs/remediation.md, "Before the merge"). The API knows no
//! repository configuration: the service that has one gives a [`MergeCheck`]
//! ([`crate::ApiState::with_merge_check`]); without it the endpoint answers 501.

use std::sync::Arc;

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use drift_model::ErrorKind;

use crate::auth::Actor;
use crate::error::ApiError;
use crate::handlers::ApiResult;
use crate::query;
use crate::state::ApiState;

/// The message of a 501: this service cannot check a merge.
pub const NO_MERGE_CHECK: &str = "this service has no repositories to check a merge against";

/// What merging `reference` would do, for the service's repositories (or the one named).
#[async_trait::async_trait]
pub trait MergeCheck: Send + Sync + std::fmt::Debug {
    /// The answer as JSON: `{checks: [...], overwrites_live_changes, sure, reasons}`. An unknown
    /// repository is a not-found error; a side that cannot be read is said in `reasons` with
    /// `sure: false`, not an error.
    async fn check(&self, reference: &str, repository: Option<&str>) -> drift_model::Result<serde_json::Value>;
}

/// A ref the API passes on: `/`-separated names of git's ordinary characters (letters, digits,
/// `. _ + -`), none empty and none starting with `.` or `-` (never an option of git, never a
/// way up a path), at most 255 bytes: the OpenAPI pattern of the `ref` parameter, exactly.
fn valid_ref(r: &str) -> bool {
    r.len() <= 255
        && r.split('/').all(|segment| {
            let mut bytes = segment.bytes();
            bytes.next().is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'+')
                && bytes.all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
        })
}

pub(crate) async fn check(State(state): State<ApiState>, Actor(actor): Actor, RawQuery(raw): RawQuery) -> ApiResult {
    let pairs = query::pairs(raw.as_deref(), &["ref", "repository"])?;
    let reference = query::required(&pairs, "ref")?;
    if !valid_ref(&reference) {
        return Err(ApiError::bad_request(format!(
            "ref {reference:?} is not a branch, tag or commit name (/-separated names of letters, digits and . _ + -, none empty or starting with . or -)"
        )));
    }
    let repository = pairs.iter().find(|(n, _)| n == "repository").map(|(_, v)| v.clone());
    let checker: Arc<dyn MergeCheck> =
        state.merge_check.clone().ok_or_else(|| ApiError::new(StatusCode::NOT_IMPLEMENTED, NO_MERGE_CHECK))?;
    tracing::info!(reference = %reference, repository = ?repository, actor = %actor, "merge check through the API");
    let answer = checker.check(&reference, repository.as_deref()).await.map_err(|e| {
        let status = match e.kind() {
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::InvalidInput => StatusCode::BAD_REQUEST,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::BAD_GATEWAY,
        };
        ApiError::new(status, e.to_string())
    })?;
    Ok((StatusCode::OK, Json(answer)).into_response())
}

#[cfg(test)]
mod tests {
    use super::valid_ref;

    #[test]
    fn refs_are_plain_names() {
        let fine = ["main", "feature/x-1", "v1.2.3", "release+2", "0123456789abcdef0123456789abcdef01234567", "a..b"];
        for ok in fine {
            assert!(valid_ref(ok), "{ok}");
        }
        let refused =
            ["", "-u", "--upload-pack=x", "/etc", "a/../b", "..", ".hidden", "a b", "a\nb", "a//b", "a/", "a/-x", "ü"];
        for bad in refused {
            assert!(!valid_ref(bad), "{bad:?}");
        }
        assert!(!valid_ref(&"a".repeat(256)));
    }
}
