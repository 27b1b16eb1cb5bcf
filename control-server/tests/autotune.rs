//! The auto-tuner end to end, through a real sidecar: a bursty hand-off of
//! packet buffers makes the tuner raise the hot cache's capacity by itself;
//! a PUT pins it, and it stays pinned while the tuner keeps ticking; `"auto"`
//! hands it back, and the tuner moves it again.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::{client, sidecar, Expect};
use sheafalloc_control::client::{CapacitySetting, Client};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// 2112-byte packet buffers land here (default capacity 32).
const HOT: &str = "size-2304";
const DEADLINE: Duration = Duration::from_secs(60);

/// A producer sends bursts of 200 buffers (more than its two sheaves hold)
/// to a consumer that checks and frees them: slow paths on both sides and
/// barn traffic, as a NIC's RX burst handed to a worker.
struct HandOff {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<u64>>,
}

impl HandOff {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (send, receive) = mpsc::sync_channel::<Vec<Box<[u8]>>>(4);
        let producer = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut bursts = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let burst: Vec<Box<[u8]>> = (0..200)
                        .map(|i| vec![(i % 251) as u8; 2112].into_boxed_slice())
                        .collect();
                    if send.send(burst).is_err() {
                        break;
                    }
                    bursts += 1;
                }
                bursts
            })
        };
        let consumer = std::thread::spawn(move || {
            let mut checked = 0u64;
            for burst in receive {
                for (i, buffer) in burst.iter().enumerate() {
                    assert!(buffer.iter().all(|&b| b == (i % 251) as u8), "corrupted");
                    checked += 1;
                }
            }
            checked
        });
        Self {
            stop,
            threads: vec![producer, consumer],
        }
    }

    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .into_iter()
            .map(|thread| thread.join().expect("the hand-off failed"))
            .sum()
    }
}

fn hot(api: &Client) -> serde_json::Value {
    common::get_json(api, &format!("/v1/caches/{HOT}"))
}

/// Polls the hot cache until `done` holds (or fails at the deadline).
fn poll(api: &Client, what: &str, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let json = hot(api);
        if done(&json) {
            return json;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {json}"
        );
        std::thread::yield_now();
    }
}

/// Waits until the tuner has run `ticks` more ticks.
fn ticks_pass(ticks: u64) {
    let until = sheafalloc::tuner_ticks() + ticks;
    let deadline = Instant::now() + DEADLINE;
    while sheafalloc::tuner_ticks() < until {
        assert!(Instant::now() < deadline, "the tuner stopped ticking");
        std::thread::yield_now();
    }
}

#[test]
fn the_tuner_raises_a_bursty_cache_a_pin_holds_and_auto_releases_it() {
    assert!(sheafalloc::autotune_enabled(), "on by default");
    let handle = sidecar(None);
    let api = client(&handle);
    let start = hot(&api);
    assert_eq!(start["tuning"], "auto");
    let default = start["sheaf_capacity"].as_u64().unwrap();
    let adjusted_at_start = start["capacity_adjustments"].as_u64().unwrap();
    let ticks_at_start = sheafalloc::tuner_ticks();
    let load = HandOff::start();

    // 1. Raised by itself, with its reason recorded, within 30 ticks of
    // the tuner (15 s under load: a tick runs at most every 500 ms). Ticks,
    // not wall time, so a slow machine cannot fail it, and a tuner that
    // takes longer to decide does.
    let raised = poll(&api, "the tuner to raise the hot cache", |json| {
        json["sheaf_capacity"].as_u64().unwrap() > default
    });
    let ticks_to_raise = sheafalloc::tuner_ticks() - ticks_at_start;
    assert!(
        ticks_to_raise <= 30,
        "raised only after {ticks_to_raise} ticks"
    );
    assert!(raised["capacity_adjustments"].as_u64().unwrap() > adjusted_at_start);
    let decision = &raised["last_decision"];
    assert_ne!(decision["reason"], "none", "{raised}");
    assert!(decision["to"].as_u64().unwrap() > decision["from"].as_u64().unwrap());
    assert!(raised["last_decision_ms_ago"].as_u64().unwrap() > 0);
    let metrics = api.metrics().expect("metrics");
    let series = format!(r#"sheafalloc_capacity_adjustments_total{{cache="{HOT}"}}"#);
    assert!(
        common::sample(&metrics, &series).unwrap_or(0.0) >= 1.0,
        "{metrics}"
    );

    // 2. Pinned at the default, it stays there while the tuner ticks on
    // under the same load.
    let pinned = api
        .set_capacity(HOT, CapacitySetting::Pinned(default))
        .expect("pin");
    assert_eq!(pinned.tuning.as_str(), "pinned");
    let adjustments = hot(&api)["capacity_adjustments"].as_u64().unwrap();
    ticks_pass(4);
    let held = hot(&api);
    assert_eq!(held["tuning"], "pinned");
    assert_eq!(held["sheaf_capacity"].as_u64(), Some(default));
    assert_eq!(held["capacity_adjustments"].as_u64(), Some(adjustments));
    assert_eq!(held["sheaf_capacity_pinned"].as_u64(), Some(1));

    // 3. "auto" hands it back; the tuner raises it again.
    let released = api
        .set_capacity(HOT, CapacitySetting::Auto)
        .expect("release");
    assert_eq!(released.tuning.as_str(), "auto");
    poll(&api, "the tuner to take the cache back", |json| {
        json["tuning"] == "auto"
            && json["capacity_adjustments"].as_u64().unwrap() > adjustments
            && json["sheaf_capacity"].as_u64().unwrap() > default
    });

    let checked = load.stop();
    assert!(checked > 0);
    // Bounded by bytes: a sheaf of 2304-byte objects holds at most 227.
    assert!(hot(&api)["sheaf_capacity"].as_u64().unwrap() <= 227);
    let _ = common::get(&api, "/healthz").expect_status(200);
}
