//! The `sheafctl` binary against a real sidecar.

mod common;

use std::process::{Command, Output};

use common::{client, get, sidecar};

fn sheafctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sheafctl"))
        .args(args)
        .env_remove("SHEAFALLOC_CONTROL_ADDR")
        .env_remove("SHEAFALLOC_CONTROL_TOKEN")
        .output()
        .expect("sheafctl runs")
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
    assert!(
        header.starts_with("CACHE") && header.contains("ALLOCS"),
        "{list}"
    );
    assert!(
        list.lines().any(|line| line.starts_with("size-256 ")),
        "{list}"
    );
    assert!(list.contains("97 of 97 caches shown"), "{list}");

    let show = stdout(&sheafctl(&["--addr", &addr, "show", "size-1024"]));
    assert!(
        show.lines()
            .any(|line| line.split_whitespace().eq(["name", "size-1024"])),
        "{show}"
    );
    assert!(show.contains("sheaf_capacity_in_use_max"), "{show}");

    let url = format!("http://{addr}/");
    let set = stdout(&sheafctl(&[
        "--addr",
        &url,
        "set-capacity",
        "size-9216",
        "5",
    ]));
    assert!(set.contains("size-9216: sheaf capacity"), "{set}");
    let cache = get(&client(), &format!("{}/v1/caches/size-9216", handle.url())).json();
    assert_eq!(cache["sheaf_capacity"], 5);

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
    assert!(watch.contains("ALLOC/S"), "{watch}");
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
    assert!(String::from_utf8_lossy(&out_of_range.stderr).contains("1..=256"));

    let unauthorized = sheafctl(&["--addr", &addr, "purge"]);
    assert_eq!(unauthorized.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unauthorized.stderr).contains("401"));
    let authorized = Command::new(env!("CARGO_BIN_EXE_sheafctl"))
        .args(["--addr", &addr, "purge"])
        .env("SHEAFALLOC_CONTROL_TOKEN", "tok")
        .output()
        .unwrap();
    assert!(authorized.status.success(), "{authorized:?}");

    for usage in [
        &["frobnicate"][..],
        &[],
        &["show"],
        &["watch", "--count", "0"],
    ] {
        let mut args = vec!["--addr", &addr];
        args.extend_from_slice(usage);
        let output = sheafctl(&args);
        assert_eq!(output.status.code(), Some(2), "{usage:?}");
        assert!(String::from_utf8_lossy(&output.stderr).contains("usage:"));
    }

    // Nothing listens there once the sidecar is gone.
    drop(handle);
    let refused = sheafctl(&["--addr", &addr, "list"]);
    assert_eq!(refused.status.code(), Some(1));
}
