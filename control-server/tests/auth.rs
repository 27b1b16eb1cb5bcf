//! Write protection and the bind rule, over a real loopback socket.

mod common;

use common::{client, get, post, put, sidecar};
use sheafalloc_control::{spawn, Config, ConfigError, SpawnError};

const TOKEN: &str = "correct horse battery staple";

#[test]
fn with_a_token_writes_need_the_bearer_header() {
    let handle = sidecar(Some(TOKEN));
    let agent = client();
    let base = handle.url();
    let capacity_url = format!("{base}/v1/caches/size-512/sheaf_capacity");
    let body = r#"{"sheaf_capacity": 20}"#;

    // Reads stay open.
    assert_eq!(get(&agent, &format!("{base}/v1/caches")).status, 200);
    assert_eq!(get(&agent, &format!("{base}/metrics")).status, 200);
    assert_eq!(get(&agent, &format!("{base}/healthz")).status, 200);

    for token in [
        None,
        Some("wrong"),
        Some(&TOKEN[..TOKEN.len() - 1]),
        Some(""),
    ] {
        let reply = put(&agent, &capacity_url, body, token);
        let message = reply.expect_error(401);
        assert!(message.contains("Bearer"), "{message}");
        assert_eq!(reply.www_authenticate.as_deref(), Some("Bearer"));
        post(&agent, &format!("{base}/v1/purge"), token).expect_error(401);
    }
    // Another scheme with the right secret is still refused.
    let reply = agent
        .put(&capacity_url)
        .header("authorization", format!("Basic {TOKEN}"))
        .send(body)
        .unwrap();
    assert_eq!(reply.status().as_u16(), 401);
    // Nothing changed so far.
    let cache = get(&agent, &format!("{base}/v1/caches/size-512")).json();
    let original = cache["sheaf_capacity"].as_u64().unwrap();
    assert_ne!(original, 20);

    let reply = put(&agent, &capacity_url, body, Some(TOKEN));
    assert_eq!(reply.status, 200, "{reply:?}");
    let cache = get(&agent, &format!("{base}/v1/caches/size-512")).json();
    assert_eq!(cache["sheaf_capacity"], 20);
    let reply = post(&agent, &format!("{base}/v1/purge"), Some(TOKEN));
    assert_eq!(reply.status, 200, "{reply:?}");
    // The scheme is case-insensitive.
    let reply = agent
        .put(&capacity_url)
        .header("authorization", format!("bearer {TOKEN}"))
        .send(format!(r#"{{"sheaf_capacity": {original}}}"#))
        .unwrap();
    assert_eq!(reply.status().as_u16(), 200);
}

#[test]
fn without_a_token_writes_are_open_on_loopback() {
    let handle = sidecar(None);
    let reply = post(&client(), &format!("{}/v1/purge", handle.url()), None);
    assert_eq!(reply.status, 200, "{reply:?}");
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
}
