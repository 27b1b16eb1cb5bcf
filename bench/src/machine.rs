//! A description of the machine and toolchain, for the report header.

use std::process::Command;

/// What the report says about where it ran.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Machine {
    /// CPU model name from `/proc/cpuinfo`.
    pub cpu: String,
    /// Logical CPUs listed in `/proc/cpuinfo`.
    pub cpus: usize,
    /// CPUs this process may run on.
    pub available: usize,
    /// `uname -r`.
    pub kernel: String,
    /// `rustc -V` at run time (the toolchain that built this, normally).
    pub rustc: String,
}

/// Reads the description.
pub fn describe() -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        cpuinfo.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name).then(|| value.trim().to_owned())
        })
    };
    // A virtual machine's model name can be as bare as "AMD EPYC", which
    // covers generations that run the same code at different speeds: the
    // family and model tell them apart.
    let cpu = match (field("model name"), field("cpu family"), field("model")) {
        (Some(name), Some(family), Some(model)) => {
            format!("{name} (family {family}, model {model})")
        }
        (Some(name), _, _) => name,
        _ => "unknown".into(),
    };
    let cpus = cpuinfo
        .lines()
        .filter(|line| line.starts_with("processor"))
        .count();
    Machine {
        cpu,
        cpus,
        available: std::thread::available_parallelism().map_or(0, |n| n.get()),
        kernel: output_of("uname", &["-r"]),
        rustc: output_of("rustc", &["-V"]),
    }
}

/// The first line a command prints, or "unknown".
pub fn output_of(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| {
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.lines().next().map(str::to_owned)
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The load average (`/proc/loadavg`: 1, 5 and 15 minutes), as text.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| "unknown".into())
}

/// [`source_commit`] for a report's provenance: the full hash, marked
/// `(with uncommitted changes)` for a dirty tree, or `unknown`.
pub fn commit_label() -> String {
    match source_commit() {
        Some((commit, true)) => format!("{commit} (with uncommitted changes)"),
        Some((commit, false)) => commit,
        None => "unknown".to_owned(),
    }
}

/// The git commit checked out in the bench's source tree when this runs,
/// and whether the tree had uncommitted changes (`None`: not a git tree).
/// Results and documents do not count (`bench/results/`, Markdown files):
/// a benchmark writes them as it runs, and they are not what was measured.
pub fn source_commit() -> Option<(String, bool)> {
    let dir = env!("CARGO_MANIFEST_DIR");
    let commit = Command::new("git")
        .args(["-C", dir, "rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())?;
    let dirty = Command::new("git")
        .args([
            "-C",
            dir,
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
        ])
        .args(MEASURED_PATHS)
        .output()
        .ok()
        .is_some_and(|out| !out.stdout.is_empty());
    Some((commit, dirty))
}

/// Whether what a benchmark runs differs between `commit` and the
/// checkout as it is (committed or not): every file but results,
/// Markdown files and this driver's own modules (`sheafalloc-bench`'s,
/// which run the workload binaries but are not built into them). An
/// error if git cannot tell (not a checkout, unknown commit).
pub fn code_changed_since(commit: &str) -> Result<bool, String> {
    let dir = env!("CARGO_MANIFEST_DIR");
    let status = Command::new("git")
        .args(["-C", dir, "diff", "--quiet", commit, "--"])
        .args(MEASURED_PATHS)
        .args(driver_paths())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("git diff: {e}"))?;
    match status.code() {
        Some(0) => Ok(false),
        Some(1) => Ok(true),
        _ => Err(format!(
            "git diff {commit} failed: is {commit} a commit of this checkout?"
        )),
    }
}

/// The paths whose changes change what a benchmark measures: everything
/// but results, which a benchmark writes as it runs, and Markdown files.
const MEASURED_PATHS: [&str; 3] = [
    ":/",
    ":(exclude,top)bench/results",
    ":(exclude,top,glob)**/*.md",
];

/// Exclusions of the driver's own files: its `main.rs` and the modules
/// its `mod` lines name (read from the source, so a module added there is
/// covered without a list to keep).
fn driver_paths() -> Vec<String> {
    let mut paths = vec![":(exclude,top)bench/src/main.rs".to_owned()];
    for line in include_str!("main.rs").lines() {
        let Some(module) = line.strip_prefix("mod ").and_then(|m| m.strip_suffix(';')) else {
            continue;
        };
        paths.push(format!(":(exclude,top)bench/src/{module}.rs"));
        paths.push(format!(":(exclude,top)bench/src/{module}"));
    }
    paths
}

impl Machine {
    /// One markdown line.
    pub fn markdown(&self) -> String {
        format!(
            "{}, {} logical CPUs ({} available to this process), kernel {}, {}",
            self.cpu, self.cpus, self.available, self.kernel, self.rustc
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_s_own_modules_are_left_out_of_the_measured_code_and_the_library_is_not() {
        let paths = driver_paths();
        for module in ["sweep", "sweep_resume", "tuning", "suite"] {
            assert!(
                paths.contains(&format!(":(exclude,top)bench/src/{module}.rs")),
                "{module} missing from {paths:?}"
            );
        }
        // The workload binaries are built from the library: its modules
        // are measured code.
        for module in ["service", "kernels", "lib"] {
            assert!(
                !paths
                    .iter()
                    .any(|p| p.contains(&format!("bench/src/{module}"))),
                "{module} left out"
            );
        }
    }

    #[test]
    fn the_cpu_names_its_family_and_model_where_cpuinfo_gives_them() {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = describe().cpu;
        if cpuinfo.contains("cpu family") && cpuinfo.contains("model name") {
            assert!(
                cpu.contains("(family ") && cpu.contains(", model "),
                "{cpu}"
            );
        } else {
            assert!(!cpu.contains("(family "), "{cpu}");
        }
    }

    #[test]
    fn an_unknown_commit_is_an_error_not_a_verdict() {
        if source_commit().is_none() {
            return; // Not a git checkout: nothing to compare with.
        }
        let error = code_changed_since("0000000000000000000000000000000000000000").unwrap_err();
        assert!(error.contains("0000000"), "{error}");
    }
}
