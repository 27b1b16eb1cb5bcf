//! [`AppState`]: what the handlers share — the write token, the Prometheus
//! registry holding the scrape-time collector, and the host topology once
//! discovered. The allocator itself is reached through `sheafalloc-core`'s
//! functions: it is a process-wide singleton, not part of the state.

use std::sync::Arc;

use prometheus::Registry;
use tokio::sync::OnceCell;

use crate::metrics::SnapshotCollector;
use crate::topology::HostTopology;

/// Shared state of the router. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    token: Option<String>,
    registry: Registry,
    host_topology: OnceCell<HostTopology>,
}

impl core::fmt::Debug for AppState {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AppState")
            .field("token", &self.inner.token.as_ref().map(|_| "<set>"))
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// State over the process's allocator. With `Some(token)` (non-empty),
    /// writes need `Authorization: Bearer <token>`.
    pub fn new(token: Option<String>) -> Self {
        let registry = Registry::new();
        // Registering into a fresh registry fails only on duplicate metric
        // names inside the collector itself, which its unit tests rule out;
        // a failure would show as an empty /metrics, never as a panic.
        let _ = registry.register(Box::new(SnapshotCollector::new()));
        Self {
            inner: Arc::new(Inner {
                token: token.filter(|token| !token.is_empty()),
                registry,
                host_topology: OnceCell::new(),
            }),
        }
    }

    /// The write token, if any.
    pub(crate) fn token(&self) -> Option<&str> {
        self.inner.token.as_deref()
    }

    /// The registry `/metrics` gathers from.
    pub(crate) fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// The host topology, discovered on first use.
    pub(crate) fn host_topology(&self) -> &OnceCell<HostTopology> {
        &self.inner.host_topology
    }
}
