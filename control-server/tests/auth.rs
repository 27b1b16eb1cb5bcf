//! The token, over a real loopback socket: writes need it, reads too when
//! asked, it may come from an owner-only file, and the bind rule.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{client, get, sidecar, Expect, Method};
use sheafalloc_control::client::{CapacitySetting, ClientError};
use sheafalloc_control::{spawn, Config, ConfigError, SpawnError};

const TOKEN: &str = "correct-horse-battery-staple";

#[test]
fn with_a_token_writes_need_the_bearer_header() {
    let handle = sidecar(Some(TOKEN));
    let anonymous = client(&handle);
    let capacity_path = "/v1/caches/size-512/sheaf_capacity";
    let body = r#"{"sheaf_capacity": 20}"#;

    // Reads stay open.
    for path in ["/v1/caches", "/metrics", "/healthz", "/", "/v1/topology"] {
        assert_eq!(get(&anonymous, path).status, 200, "{path}");
    }

    let wrong = [
        None,
        Some("wrong".to_owned()),
        Some(TOKEN[..TOKEN.len() - 1].to_owned()),
        Some(format!("{TOKEN}x")),
    ];
    for token in wrong {
        let client = client(&handle).with_token(token.clone());
        let reply = client
            .call(Method::PUT, capacity_path)
            .json(body)
            .send()
            .unwrap();
        let message = reply.expect_error(401);
        assert!(message.contains("Bearer"), "{message}");
        assert_eq!(reply.header("www-authenticate"), Some("Bearer"));
        // The body was never read, so the connection cannot be reused, and
        // the answer says so: a pooling client's next request (the purge
        // just below) goes out on a new connection.
        assert_eq!(reply.header("connection"), Some("close"));
        let error = client.purge().unwrap_err();
        assert!(
            matches!(error, ClientError::Status { status: 401, .. }),
            "{token:?}: {error}"
        );
    }
    // Another scheme with the right secret is still refused.
    let reply = anonymous
        .call(Method::PUT, capacity_path)
        .header("authorization", format!("Basic {TOKEN}"))
        .json(body)
        .send()
        .unwrap();
    assert_eq!(reply.status, 401);
    // Nothing changed so far.
    let original = anonymous.cache("size-512").unwrap().sheaf_capacity;
    assert_ne!(original, 20);

    let authorized = client(&handle).with_token(Some(TOKEN.to_owned()));
    let changed = authorized
        .set_capacity("size-512", CapacitySetting::Pinned(20))
        .unwrap();
    assert_eq!(changed.sheaf_capacity, 20);
    assert_eq!(anonymous.cache("size-512").unwrap().sheaf_capacity, 20);
    assert!(authorized.purge().is_ok());
    // The scheme is case-insensitive.
    let reply = anonymous
        .call(Method::PUT, capacity_path)
        .header("authorization", format!("bearer {TOKEN}"))
        .json(format!(r#"{{"sheaf_capacity": {original}}}"#))
        .send()
        .unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
}

#[test]
fn protected_reads_need_the_token_but_the_page_and_healthz_do_not() {
    let config = Config::new("127.0.0.1:0".parse().unwrap())
        .with_token(TOKEN)
        .with_token_for_reads(true);
    let handle = spawn(config).unwrap();
    let anonymous = client(&handle);
    for path in [
        "/v1/caches",
        "/v1/caches/size-256",
        "/v1/topology",
        "/metrics",
    ] {
        get(&anonymous, path).expect_error(401);
        let wrong = client(&handle).with_token(Some("nope".to_owned()));
        get(&wrong, path).expect_error(401);
    }
    for path in ["/healthz", "/", "/page.js", "/page.css"] {
        assert_eq!(get(&anonymous, path).status, 200, "{path}");
    }
    let authorized = client(&handle).with_token(Some(TOKEN.to_owned()));
    assert_eq!(
        authorized.caches().unwrap().caches.len(),
        sheafalloc_core::size_class::NUM_CLASSES
    );
    assert!(authorized.metrics().unwrap().contains("sheafalloc_nodes"));
    assert!(authorized.topology().is_ok());
    assert!(authorized.purge().is_ok());
}

/// A token file in a fresh directory, removed at drop.
struct TokenFile {
    dir: std::path::PathBuf,
    path: std::path::PathBuf,
}

impl TokenFile {
    fn new(name: &str, contents: &str, mode: u32) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "sheafalloc-auth-test-{}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, contents).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        Self { dir, path }
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn a_token_file_readable_by_its_owner_only_protects_writes() {
    let file = TokenFile::new("ok", &format!("{TOKEN}\n"), 0o600);
    let config = Config::new("127.0.0.1:0".parse().unwrap())
        .with_token_file(&file.path)
        .unwrap();
    assert_eq!(
        config.token.as_deref(),
        Some(TOKEN),
        "the newline is not part of it"
    );
    let handle = spawn(config).unwrap();
    assert!(client(&handle).purge().is_err());
    let authorized = client(&handle).with_token(Some(TOKEN.to_owned()));
    assert!(authorized.purge().is_ok());

    let open = TokenFile::new("open", TOKEN, 0o644);
    let error = Config::new("127.0.0.1:0".parse().unwrap())
        .with_token_file(&open.path)
        .unwrap_err();
    assert!(
        matches!(
            error,
            ConfigError::TokenFileReadableByOthers { mode: 0o644, .. }
        ),
        "{error}"
    );
    let missing = Config::new("127.0.0.1:0".parse().unwrap())
        .with_token_file(file.dir.join("missing"))
        .unwrap_err();
    assert!(
        matches!(missing, ConfigError::TokenFile { .. }),
        "{missing}"
    );
}

#[test]
fn without_a_token_writes_are_open_on_loopback() {
    let handle = sidecar(None);
    assert!(client(&handle).purge().is_ok());
}

#[test]
fn a_non_loopback_address_without_a_token_is_refused_before_binding() {
    for addr in ["0.0.0.0:0", "[::]:0", "192.0.2.1:9187"] {
        let config = Config::new(addr.parse().unwrap());
        let error = spawn(config.clone()).expect_err(addr);
        assert!(
            matches!(
                error,
                SpawnError::Config(ConfigError::NonLoopbackWithoutToken(refused)) if refused == config.addr
            ),
            "{addr}: {error}"
        );
        let message = error.to_string();
        assert!(message.contains("SHEAFALLOC_CONTROL_TOKEN"), "{message}");
        assert!(message.contains("loopback"), "{message}");
    }
    let reads = Config::new("127.0.0.1:0".parse().unwrap()).with_token_for_reads(true);
    assert!(matches!(
        spawn(reads),
        Err(SpawnError::Config(ConfigError::ReadsNeedATokenButNoneIsSet))
    ));
}
