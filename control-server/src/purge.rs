//! `POST /v1/purge`: returns free memory to the OS now — every barn is
//! emptied into the slabs and every empty slab is returned. Objects cached
//! in threads' own sheaves stay where they are (each thread owns its own).
//!
//! The request is a write like any other: `content-type: application/json`
//! with the body `{}` (an empty body is taken as `{}`); the purge has no
//! options, so any field is refused.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::Json;
use serde::{Deserialize, Serialize};
use sheafalloc_core::runtime;

use crate::error::ApiError;

/// Body of `POST /v1/purge`: `{}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurgeRequest {}

/// Answer to a purge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Purged {
    /// Bytes returned to the OS by this purge.
    pub bytes_returned: u64,
}

/// `POST /v1/purge`.
pub(crate) async fn purge(body: Result<Bytes, BytesRejection>) -> Result<Json<Purged>, ApiError> {
    let body = body.map_err(|rejection| {
        crate::rejection_to_error(rejection.status(), rejection.body_text())
    })?;
    parse_purge_request(&body)?;
    Ok(Json(Purged {
        bytes_returned: runtime::purge(),
    }))
}

fn parse_purge_request(body: &[u8]) -> Result<PurgeRequest, ApiError> {
    if body.trim_ascii().is_empty() {
        return Ok(PurgeRequest {});
    }
    if body.trim_ascii_start().first() != Some(&b'{') {
        return Err(ApiError::BadRequest(
            "expected the JSON body {} (a purge has no options)".to_owned(),
        ));
    }
    serde_json::from_slice(body).map_err(|error| {
        ApiError::BadRequest(format!(
            "expected the JSON body {{}} (a purge has no options): {error}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_empty_object_or_nothing_is_a_purge() {
        for ok in ["", " \n", "{}", " { } "] {
            assert_eq!(
                parse_purge_request(ok.as_bytes()),
                Ok(PurgeRequest {}),
                "{ok:?}"
            );
        }
        for bad in ["[]", "null", "{\"all\": true}", "{", "{} {}", "x"] {
            assert!(
                matches!(
                    parse_purge_request(bad.as_bytes()),
                    Err(ApiError::BadRequest(_))
                ),
                "{bad:?}"
            );
        }
    }
}
