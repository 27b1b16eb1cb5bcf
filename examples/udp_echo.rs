//! A UDP echo server with the one-line swap: one buffer allocated per
//! datagram, sent back and dropped. Runs a built-in loopback client for
//! `seconds` and prints datagrams/s, or serves until killed with `--serve`.
//!
//! `udp_echo [seconds]` or `udp_echo --serve [addr]`. With
//! `SHEAFALLOC_CONTROL_ADDR` set, the control plane starts too.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

const DATAGRAM: usize = 1472;

fn serve(socket: UdpSocket, stop: Arc<AtomicBool>) {
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    while !stop.load(Ordering::Relaxed) {
        let mut buffer = Box::new([0u8; 2048]);
        if let Ok((n, peer)) = socket.recv_from(&mut buffer[..]) {
            let _ = socket.send_to(&buffer[..n], peer);
        }
    }
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let first = args.next();
    if first.as_deref() == Some("--serve") {
        let addr = args.next().unwrap_or_else(|| "127.0.0.1:7001".into());
        let socket = UdpSocket::bind(&addr)?;
        println!("udp_echo serving on {}", socket.local_addr()?);
        serve(socket, Arc::new(AtomicBool::new(false)));
        return Ok(());
    }
    let seconds: u64 = first.and_then(|s| s.parse().ok()).unwrap_or(5);
    let server_socket = UdpSocket::bind("127.0.0.1:0")?;
    let server_addr = server_socket.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || serve(server_socket, stop))
    };
    let client = UdpSocket::bind("127.0.0.1:0")?;
    client.connect(server_addr)?;
    client.set_read_timeout(Some(Duration::from_millis(200)))?;
    let window = 32;
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let (mut sent, mut echoed, mut sequence) = (0u64, 0u64, 0u64);
    while Instant::now() < deadline {
        for _ in 0..window {
            sequence += 1;
            let mut datagram = vec![(sequence % 251) as u8; DATAGRAM];
            datagram[..8].copy_from_slice(&sequence.to_be_bytes());
            if client.send(&datagram).is_ok() {
                sent += 1;
            }
        }
        for _ in 0..window {
            let mut buffer = vec![0u8; 2048];
            match client.recv(&mut buffer) {
                Ok(n) => {
                    assert_eq!(n, DATAGRAM, "echo changed the datagram length");
                    let fill = buffer[8];
                    assert!(
                        buffer[8..n].iter().all(|b| *b == fill),
                        "echo changed the payload"
                    );
                    echoed += 1;
                }
                Err(_) => break,
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    server.join().expect("server thread");
    println!(
        "udp_echo: {sent} datagrams sent, {echoed} echoed in {seconds} s ({:.0} echoed/s); loss is normal for UDP under overload",
        echoed as f64 / seconds as f64
    );
    let cache = sheafalloc::cache("size-2048").expect("cache");
    println!(
        "size-2048: {} allocations, barn hits {}, slab refills {}",
        cache.allocations, cache.barn_get_hits, cache.slab_refills
    );
    Ok(())
}
