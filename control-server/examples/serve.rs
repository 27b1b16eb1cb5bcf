//! A process with sheafalloc as its allocator and nothing else for the
//! control plane: run it with `SHEAFALLOC_CONTROL_ADDR=127.0.0.1:9187` and
//! the `control` feature starts the sidecar before `main` (the URL goes to
//! stderr). Meanwhile `main` runs a steady allocation workload over a few
//! size classes, so the counters move, and a second thread frees buffers a
//! third one allocated (with `SHEAFALLOC_NUMA_NODES=N` those frees cross
//! nodes, so remote frees show too).
//!
//! ```text
//! SHEAFALLOC_CONTROL_ADDR=127.0.0.1:9187 cargo run -p sheafalloc-control --example serve -- --seconds 60
//! curl -s 127.0.0.1:9187/v1/caches/size-256
//! ```
//!
//! Without `SHEAFALLOC_CONTROL_ADDR` it starts the sidecar itself on
//! `127.0.0.1:0` (a free port) and prints the URL.

use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

fn main() {
    let seconds = parse_seconds().unwrap_or_else(|message| {
        eprintln!("serve: {message}\nusage: serve [--seconds N]   (default 60)");
        std::process::exit(2);
    });
    // Started before `main` when SHEAFALLOC_CONTROL_ADDR is set; otherwise
    // here, on a free loopback port.
    let _own_sidecar = if std::env::var_os(sheafalloc_control::config::ADDR_ENV).is_none() {
        let config = sheafalloc_control::Config::new("127.0.0.1:0".parse().expect("an address"));
        match sheafalloc_control::spawn(config) {
            Ok(handle) => {
                eprintln!("sheafalloc: control plane listening on {}", handle.url());
                Some(handle)
            }
            Err(error) => {
                eprintln!("serve: control plane not started: {error}");
                std::process::exit(1);
            }
        }
    } else {
        None
    };
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let hand_off_thread = std::thread::spawn(move || hand_off(deadline));
    let mut kept: Vec<Vec<u8>> = Vec::new();
    let mut round = 0u64;
    while Instant::now() < deadline {
        // Packet-sized buffers, small strings and a rotating window of
        // kept objects: steady allocation and free traffic.
        let packets: Vec<Vec<u8>> = (0..512)
            .map(|i| vec![i as u8; [256, 1500, 2112][i % 3]])
            .collect();
        let labels: Vec<String> = (0..256).map(|i| format!("request-{round}-{i}")).collect();
        kept.push(vec![0u8; 2112]);
        if kept.len() > 1000 {
            kept.drain(..500);
        }
        std::hint::black_box((&packets, &labels));
        round += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = hand_off_thread.join();
}

/// A producer thread allocates 512-byte buffers in batches and a consumer
/// thread frees them: every free is a cross-thread one.
fn hand_off(deadline: Instant) {
    let (send, receive) = std::sync::mpsc::sync_channel::<Vec<Vec<u8>>>(4);
    let consumer = std::thread::spawn(move || {
        for batch in receive {
            drop(batch);
        }
    });
    while Instant::now() < deadline {
        let batch: Vec<Vec<u8>> = (0..256).map(|i| vec![i as u8; 512]).collect();
        if send.send(batch).is_err() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(send);
    let _ = consumer.join();
}

fn parse_seconds() -> Result<u64, String> {
    let mut args = std::env::args().skip(1);
    let mut seconds = 60;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => {
                seconds = args
                    .next()
                    .and_then(|value| value.parse().ok())
                    .ok_or("--seconds needs a number")?;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(seconds)
}
