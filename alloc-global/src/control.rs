//! Starts the control-plane sidecar at process start when
//! `SHEAFALLOC_CONTROL_ADDR` is set (feature `control`). To be written.
