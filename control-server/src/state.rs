//! [`AppState`]: what the handlers share — the token and whether reads
//! need it, the cached `/metrics` exposition, and the host topology once
//! discovered. The allocator itself is reached through `sheafalloc-core`'s
//! functions: it is a process-wide singleton, not part of the state.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OnceCell;

use crate::config::{Config, METRICS_MAX_AGE};
use crate::metrics::ExpositionCache;
use crate::topology::HostTopology;

/// Shared state of the router. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    token: Option<String>,
    token_for_reads: bool,
    expositions: ExpositionCache,
    host_topology: OnceCell<HostTopology>,
}

impl core::fmt::Debug for AppState {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AppState")
            .field("token", &self.inner.token.as_ref().map(|_| "<set>"))
            .field("token_for_reads", &self.inner.token_for_reads)
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// State over the process's allocator. With `Some(token)` (non-empty),
    /// writes need `Authorization: Bearer <token>`; reads stay open and
    /// `/metrics` is cached for [`METRICS_MAX_AGE`].
    pub fn new(token: Option<String>) -> Self {
        Self::build(token, false, METRICS_MAX_AGE)
    }

    /// State as `config` asks: its token, whether reads need it, and how
    /// long a `/metrics` exposition is reused.
    pub fn from_config(config: &Config) -> Self {
        Self::build(
            config.token.clone(),
            config.token_for_reads,
            config.metrics_max_age,
        )
    }

    fn build(token: Option<String>, token_for_reads: bool, metrics_max_age: Duration) -> Self {
        let token = token.filter(|token| !token.is_empty());
        Self {
            inner: Arc::new(Inner {
                token_for_reads: token_for_reads && token.is_some(),
                token,
                expositions: ExpositionCache::new(metrics_max_age),
                host_topology: OnceCell::new(),
            }),
        }
    }

    /// The token, if any.
    pub(crate) fn token(&self) -> Option<&str> {
        self.inner.token.as_deref()
    }

    /// Whether reads need the token too.
    pub(crate) fn token_for_reads(&self) -> bool {
        self.inner.token_for_reads
    }

    /// The `/metrics` exposition cache.
    pub(crate) fn expositions(&self) -> &ExpositionCache {
        &self.inner.expositions
    }

    /// The host topology, discovered on first use.
    pub(crate) fn host_topology(&self) -> &OnceCell<HostTopology> {
        &self.inner.host_topology
    }
}
