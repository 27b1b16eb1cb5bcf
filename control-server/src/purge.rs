//! `POST /v1/purge`: returns free memory to the OS now — every barn is
//! emptied into the slabs and every empty slab is returned. Objects cached
//! in threads' own sheaves stay where they are (each thread owns its own).

use axum::Json;
use serde::{Deserialize, Serialize};
use sheafalloc_core::runtime;

/// Answer to a purge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Purged {
    /// Bytes returned to the OS by this purge.
    pub bytes_returned: u64,
}

/// `POST /v1/purge`.
pub(crate) async fn purge() -> Json<Purged> {
    Json(Purged {
        bytes_returned: runtime::purge(),
    })
}
