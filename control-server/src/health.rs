//! `GET /healthz`: liveness. Answers as long as the sidecar's runtime
//! thread serves; it reads nothing from the allocator.

use axum::Json;
use serde::{Deserialize, Serialize};

/// Body of `GET /healthz`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// Always `"ok"`.
    pub status: String,
}

/// `GET /healthz`.
pub(crate) async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".to_owned(),
    })
}
