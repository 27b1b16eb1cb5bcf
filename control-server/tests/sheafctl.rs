//! The `sheafctl` binary against a real sidecar: every command, its help
//! and completions, its errors and exit codes, and `watch` both on a pipe
//! (plain frames) and on a terminal (redrawn in place, through `script`,
//! which gives it a pseudo-terminal).

mod common;

use std::process::{Command, Output};

use common::{client, sidecar};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

fn sheafctl(args: &[&str]) -> Output {
    command(args).output().expect("sheafctl runs")
}

fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sheafctl"));
    command
        .args(args)
        .env_remove("SHEAFALLOC_CONTROL_ADDR")
        .env_remove("SHEAFALLOC_CONTROL_TOKEN")
        .env_remove("SHEAFALLOC_CONTROL_TOKEN_FILE");
    command
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "sheafctl failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn list_show_set_capacity_purge_topology_and_watch() {
    let handle = sidecar(None);
    let addr = handle.local_addr().to_string();

    let list = stdout(&sheafctl(&["--addr", &addr, "list", "--all"]));
    let header = list.lines().next().unwrap();
    for column in [
        "CACHE", "CAP", "TUNING", "ALLOCS", "SLOW", "BARN-HIT", "LIVE", "HELD",
    ] {
        assert!(
            header.split_whitespace().any(|word| word == column),
            "{column}: {list}"
        );
    }
    let row = list
        .lines()
        .find(|line| line.starts_with("size-8 "))
        .unwrap_or_else(|| panic!("{list}"));
    // This process allocates 8-byte objects: a share is shown, and the
    // auto-tuner has the cache (nobody pinned it).
    assert!(row.contains('%'), "{row}");
    assert!(row.split_whitespace().any(|cell| cell == "auto"), "{row}");
    let all = sheafalloc_core::size_class::NUM_CLASSES;
    assert!(
        list.contains(&format!("{all} of {all} caches shown")),
        "{list}"
    );

    let show = stdout(&sheafctl(&["--addr", &addr, "show", "size-1024"]));
    assert!(
        show.lines()
            .any(|line| line.split_whitespace().eq(["name", "size-1024"])),
        "{show}"
    );
    for field in [
        "sheaf_capacity_in_use_max",
        "sheaf_capacity_max",
        "slow_path_share",
        "tuning",
    ] {
        assert!(show.contains(field), "{field}: {show}");
    }

    let url = format!("http://{addr}/");
    let set = stdout(&sheafctl(&[
        "--addr",
        &url,
        "set-capacity",
        "size-9216",
        "5",
    ]));
    assert!(set.contains("size-9216: sheaf capacity"), "{set}");
    assert_eq!(
        client(&handle).cache("size-9216").unwrap().sheaf_capacity,
        5
    );

    let purge = stdout(&sheafctl(&["--addr", &addr, "purge"]));
    assert!(purge.starts_with("purged: "), "{purge}");

    let topology = stdout(&sheafctl(&["--addr", &addr, "topology"]));
    assert!(topology.contains("node 0: cpus"), "{topology}");

    let watch = stdout(&sheafctl(&[
        "--addr",
        &addr,
        "watch",
        "--count",
        "2",
        "--interval-ms",
        "50",
        "--all",
    ]));
    assert_eq!(watch.matches("--- frame ").count(), 2, "{watch}");
    assert!(!watch.contains('\x1b'), "no escapes on a pipe: {watch:?}");
    let header = watch.lines().nth(1).unwrap();
    for column in ["ALLOC/S", "SLOW", "BARN-HIT", "TUNING"] {
        assert!(header.contains(column), "{column}: {watch}");
    }
    // The address also comes from the variable the sidecar reads.
    let from_env = command(&["list"])
        .env("SHEAFALLOC_CONTROL_ADDR", &addr)
        .output()
        .unwrap();
    assert!(stdout(&from_env).contains("caches shown"));
}

#[test]
fn watch_redraws_in_place_on_a_terminal() {
    let handle = sidecar(None);
    let addr = handle.local_addr().to_string();
    // `script` runs the command on a pseudo-terminal and copies what it
    // writes there to our stdout.
    let line = format!(
        "{} --addr {addr} watch --count 3 --interval-ms 30",
        env!("CARGO_BIN_EXE_sheafctl")
    );
    let output = Command::new("script")
        .args(["--quiet", "--return", "--command", &line, "/dev/null"])
        .env_remove("SHEAFALLOC_CONTROL_ADDR")
        .output()
        .expect("script(1) runs (util-linux)");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert_eq!(text.matches("\x1b[H\x1b[J").count(), 3, "{text:?}");
    assert_eq!(text.matches("--- frame ").count(), 3, "{text:?}");
}

#[test]
fn help_and_completions_come_from_the_argument_parser() {
    let help = stdout(&sheafctl(&["--help"]));
    for command in [
        "list",
        "show",
        "set-capacity",
        "purge",
        "topology",
        "watch",
        "completions",
    ] {
        assert!(help.contains(command), "{command}: {help}");
    }
    assert!(help.contains("SHEAFALLOC_CONTROL_ADDR"), "{help}");
    let watch_help = stdout(&sheafctl(&["watch", "--help"]));
    assert!(watch_help.contains("--interval-ms"), "{watch_help}");
    let bash = stdout(&sheafctl(&["completions", "bash"]));
    assert!(bash.contains("complete -F _sheafctl"), "{bash}");
    assert!(bash.contains("set-capacity"), "{bash}");
    let zsh = stdout(&sheafctl(&["completions", "zsh"]));
    assert!(zsh.contains("#compdef sheafctl"), "{zsh}");
    let version = stdout(&sheafctl(&["--version"]));
    assert!(version.contains(env!("CARGO_PKG_VERSION")), "{version}");
}

#[test]
fn errors_have_messages_and_exit_codes() {
    let handle = sidecar(Some("tok"));
    let addr = handle.local_addr().to_string();

    let unknown = sheafctl(&["--addr", &addr, "show", "size-3"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("404"));

    let out_of_range = sheafctl(&[
        "--addr",
        &addr,
        "--token",
        "tok",
        "set-capacity",
        "size-256",
        "0",
    ]);
    assert_eq!(out_of_range.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out_of_range.stderr).contains("1..=1024"));
    let too_many_bytes = sheafctl(&[
        "--addr",
        &addr,
        "--token",
        "tok",
        "set-capacity",
        "size-262144",
        "3",
    ]);
    assert_eq!(too_many_bytes.status.code(), Some(1));
    let message = String::from_utf8_lossy(&too_many_bytes.stderr);
    assert!(
        message.contains("422") && message.contains("1..=2"),
        "{message}"
    );

    let unauthorized = sheafctl(&["--addr", &addr, "purge"]);
    assert_eq!(unauthorized.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unauthorized.stderr).contains("401"));
    let authorized = command(&["--addr", &addr, "purge"])
        .env("SHEAFALLOC_CONTROL_TOKEN", "tok")
        .output()
        .unwrap();
    assert!(authorized.status.success(), "{authorized:?}");

    // A token file must be the owner's alone, as for the sidecar.
    let dir = std::env::temp_dir().join(format!("sheafctl-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token_file = dir.join("token");
    std::fs::write(&token_file, "tok\n").unwrap();
    let path = token_file.to_str().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(sheafctl(&["--addr", &addr, "--token-file", path, "purge"])
        .status
        .success());
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let open = sheafctl(&["--addr", &addr, "--token-file", path, "purge"]);
    assert_eq!(open.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&open.stderr).contains("chmod 600"));
    let _ = std::fs::remove_dir_all(&dir);

    for usage in [
        &["frobnicate"][..],
        &[],
        &["show"],
        &["watch", "--count", "0"],
        &["watch", "--interval-ms", "0"],
        &["set-capacity", "size-256", "sixty"],
        &["--token", "a", "--token-file", "/x", "list"],
    ] {
        let mut args = vec!["--addr", &addr];
        args.extend_from_slice(usage);
        let output = sheafctl(&args);
        assert_eq!(output.status.code(), Some(2), "{usage:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.starts_with("error: ") && stderr.contains("--help"),
            "{usage:?}: {stderr}"
        );
    }
    let bad_address = sheafctl(&["--addr", "https://127.0.0.1:1", "list"]);
    assert_eq!(bad_address.status.code(), Some(1));

    // Nothing listens there once the sidecar is gone.
    drop(handle);
    let refused = sheafctl(&["--addr", &addr, "list"]);
    assert_eq!(refused.status.code(), Some(1));
}
