//! The HTTP sidecar of sheafalloc (see the control-plane issue): serves
//! per-cache statistics and live tuning. Not yet implemented.
#![warn(missing_docs)]
