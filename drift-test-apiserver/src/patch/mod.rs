//! The patch types of the Kubernetes API: JSON patch (RFC 6902), JSON merge patch (RFC 7386)
//! and strategic merge patch. Server-side apply lives in [`crate::apply`].

pub mod strategic;

use serde_json::Value;

/// The patch type named by a request's Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`
    Json,
    /// `application/merge-patch+json`
    Merge,
    /// `application/strategic-merge-patch+json`
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply)
    Apply,
}

impl PatchType {
    /// The patch type for a Content-Type header value.
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        let ct = ct.split(';').next().unwrap_or("").trim();
        match ct {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(PatchType::Apply),
            _ => None,
        }
    }
}

/// Error applying a patch.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The patch document did not parse.
    #[error("invalid patch: {0}")]
    Invalid(String),
    /// A JSON patch operation failed (a failed `test`, a missing path).
    #[error("the server rejected our request due to an error in our request: {0}")]
    Failed(String),
}

/// Apply a JSON patch or merge patch or strategic merge patch to `target`.
pub fn apply_patch(kind: &str, ty: PatchType, target: &Value, patch: &[u8]) -> Result<Value, PatchError> {
    match ty {
        PatchType::Json => {
            let p: json_patch::Patch = serde_json::from_slice(patch).map_err(|e| PatchError::Invalid(e.to_string()))?;
            let mut out = target.clone();
            json_patch::patch(&mut out, &p).map_err(|e| PatchError::Failed(e.to_string()))?;
            Ok(out)
        }
        PatchType::Merge => {
            let p: Value = serde_json::from_slice(patch).map_err(|e| PatchError::Invalid(e.to_string()))?;
            let mut out = target.clone();
            json_patch::merge(&mut out, &p);
            Ok(out)
        }
        PatchType::Strategic => {
            let p: Value = serde_json::from_slice(patch).map_err(|e| PatchError::Invalid(e.to_string()))?;
            if !p.is_object() {
                return Err(PatchError::Invalid("patch is not a JSON object".into()));
            }
            let mut out = target.clone();
            strategic::merge(kind, &mut out, &p);
            Ok(out)
        }
        PatchType::Apply => Err(PatchError::Invalid("apply patches are handled by server-side apply".into())),
    }
}
