//! Starts the control-plane sidecar at process start (feature `control`).
//!
//! With this feature, a process whose only change is the
//! `#[global_allocator]` line gets the HTTP sidecar of `sheafalloc-control`
//! whenever `SHEAFALLOC_CONTROL_ADDR` is set (for example
//! `SHEAFALLOC_CONTROL_ADDR=127.0.0.1:9187`; port 0 picks a free port). A
//! function pointer in the ELF `.init_array` section runs before `main`,
//! starts the sidecar, keeps its handle for the life of the process, and
//! prints the URL, or why it did not start, to stderr. Without the variable
//! it does nothing.
//!
//! # Caveats: this runs before `main`
//!
//! * It runs while the dynamic loader runs constructors, before Rust's
//!   `main` and before other crates' initialisation that happens in `main`.
//!   It uses only what works there: environment reads, a socket, a thread.
//! * It must not panic (that would abort before `main`): every failure is a
//!   message on stderr, and the process goes on without the sidecar.
//! * A refused configuration (a non-loopback address without
//!   `SHEAFALLOC_CONTROL_TOKEN`, an unparsable address, a port in use) is
//!   reported, not fatal.
//! * A child made by `fork()` has no sidecar thread (threads do not survive
//!   `fork`); it would also share the parent's listening socket, so it
//!   should not expect one.
//! * Only ELF targets on Linux run `.init_array`; elsewhere call
//!   `sheafalloc_control::spawn` from `main`.

use std::io::Write;
use std::sync::OnceLock;

use sheafalloc_control::ControlHandle;

/// The sidecar started from the environment, kept for the whole process.
static CONTROL: OnceLock<ControlHandle> = OnceLock::new();

/// Run by the loader before `main`. The C ABI and the signature without
/// arguments are what `.init_array` entries are called with (glibc passes
/// `argc, argv, envp`, which the C calling convention lets us ignore).
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static START_CONTROL_PLANE: extern "C" fn() = start_control_plane;

extern "C" fn start_control_plane() {
    let mut stderr = std::io::stderr();
    match sheafalloc_control::spawn_from_env() {
        Ok(None) => {}
        Ok(Some(handle)) => {
            let _ = writeln!(
                stderr,
                "sheafalloc: control plane listening on {}",
                handle.url()
            );
            // Set once, here: the constructor runs once per process.
            let _ = CONTROL.set(handle);
        }
        Err(error) => {
            let _ = writeln!(stderr, "sheafalloc: control plane not started: {error}");
        }
    }
}
