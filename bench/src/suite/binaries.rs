//! Finding the `wl-*` workload binaries: they sit next to the driver's own
//! executable (cargo builds every binary of the package into one folder).

use std::path::{Path, PathBuf};

use sheafalloc_bench::peers::{self, Peer};

/// The binary of each allocator, in `peers::ALL` order.
pub fn locate() -> Result<Vec<(Peer, PathBuf)>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let dir = exe
        .parent()
        .ok_or_else(|| format!("{} has no parent folder", exe.display()))?;
    let found: Vec<(Peer, PathBuf)> = peers::ALL
        .into_iter()
        .map(|peer| (peer, path_of(dir, peer)))
        .collect();
    let missing: Vec<String> = found
        .iter()
        .filter(|(_, path)| !path.is_file())
        .map(|(_, path)| path.display().to_string())
        .collect();
    if missing.is_empty() {
        Ok(found)
    } else {
        Err(format!(
            "workload binaries missing: {}\nbuild every binary of the package first: \
             cargo build --release -p sheafalloc-bench",
            missing.join(", ")
        ))
    }
}

/// Where `peer`'s binary is expected in `dir`.
pub fn path_of(dir: &Path, peer: Peer) -> PathBuf {
    dir.join(format!("wl-{}", peer.name()))
}
