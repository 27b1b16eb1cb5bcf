//! `SHEAFALLOC_CAPACITY` and `SHEAFALLOC_AUTOTUNE` at start-up: good
//! entries pin their caches, each bad entry is reported on stderr with what
//! is wrong with it and skipped, and the rest still apply.
//!
//! A plain `main`: it re-runs itself with the variables set (they are read
//! once, at the engine's initialisation), and the child reports what it
//! sees.

use std::process::Command;

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

const REPORTED: [&str; 4] = ["size-256", "size-2304", "size-262144", "size-64"];

/// The child: one line per cache, `name capacity tuning`.
fn report() {
    for name in REPORTED {
        let cache = sheafalloc::cache(name).expect("a cache");
        println!(
            "{name} {} {}",
            cache.sheaf_capacity,
            sheafalloc::tuning(name).expect("a cache").as_str()
        );
    }
}

fn run(vars: &[(&str, &str)]) -> (String, String) {
    let mut command = Command::new(std::env::current_exe().expect("this test"));
    command.env("CAPACITY_ENV_CHILD", "1");
    command.env_remove("SHEAFALLOC_CAPACITY");
    command.env_remove("SHEAFALLOC_AUTOTUNE");
    for (name, value) in vars {
        command.env(name, value);
    }
    let output = command.output().expect("the child runs");
    assert!(output.status.success(), "{output:?}");
    (
        String::from_utf8(output.stdout).expect("text"),
        String::from_utf8(output.stderr).expect("text"),
    )
}

fn main() {
    if std::env::var_os("CAPACITY_ENV_CHILD").is_some() {
        report();
        return;
    }

    let (stdout, stderr) = run(&[(
        "SHEAFALLOC_CAPACITY",
        "size-256=128, size-255=8,size-2304 = 64,size-262144=3,size-64,size-512=lots",
    )]);
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "size-256 128 pinned",
            "size-2304 64 pinned",
            "size-262144 2 auto",
            "size-64 64 auto",
        ],
        "{stderr}"
    );
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("sheafalloc: SHEAFALLOC_CAPACITY: "))
        .collect();
    assert_eq!(errors.len(), 4, "{stderr}");
    for (error, expected) in errors.iter().zip([
        "no cache named \"size-255\"",
        "capacity 3 is outside the range 1..=2 of size-262144",
        "\"size-64\" is not of the form size-<bytes>=<capacity>",
        "capacity \"lots\" is not a whole number",
    ]) {
        assert!(error.contains(expected), "{error}");
        assert!(
            error.ends_with("entry skipped, the others apply"),
            "{error}"
        );
    }

    let (stdout, stderr) = run(&[
        ("SHEAFALLOC_AUTOTUNE", "off"),
        ("SHEAFALLOC_CAPACITY", "size-256=100"),
    ]);
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "size-256 100 pinned",
            "size-2304 32 off",
            "size-262144 2 off",
            "size-64 64 off",
        ],
        "{stderr}"
    );
    assert!(stderr.is_empty(), "{stderr}");

    let (stdout, stderr) = run(&[("SHEAFALLOC_AUTOTUNE", "sometimes")]);
    assert!(stdout.contains("size-64 64 auto"), "{stdout}");
    assert!(
        stderr.contains(
            "SHEAFALLOC_AUTOTUNE=sometimes is neither on nor off; the auto-tuner stays on"
        ),
        "{stderr}"
    );
    println!("test result: ok. 3 passed; 0 failed");
}
