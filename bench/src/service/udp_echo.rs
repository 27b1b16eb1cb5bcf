//! UDP echo over loopback: a server thread receives each datagram into a
//! freshly allocated buffer and sends it back; a client thread keeps a
//! window of 32 datagrams of 512 B in flight, allocating each one it sends
//! and a buffer for each echo it receives. Reports datagrams echoed per
//! second (round trips).
//!
//! Loopback may drop a datagram when a socket buffer overflows; the client
//! then times out (20 ms), counts the window as lost and refills it.

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::time::Duration;

use super::progress::{Budget, Progress, Window};

/// Datagrams in flight.
pub const WINDOW: usize = 32;
/// Payload bytes per datagram.
pub const PAYLOAD: usize = 512;
/// Receive buffer per datagram (a packet buffer's size).
pub const BUFFER: usize = 2048;

/// The outcome of a run.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    /// Echoes received inside the window.
    pub window: Window,
    /// Datagrams given up as lost (whole run).
    pub lost: u64,
}

/// Runs the echo; errors if the sockets cannot be set up.
pub fn run(budget: &Budget) -> std::io::Result<Outcome> {
    let server = UdpSocket::bind("127.0.0.1:0")?;
    server.set_read_timeout(Some(Duration::from_millis(20)))?;
    let client = UdpSocket::bind("127.0.0.1:0")?;
    client.connect(server.local_addr()?)?;
    client.set_read_timeout(Some(Duration::from_millis(20)))?;
    let progress = Progress::new(1);
    let progress = &progress;
    // Both threads borrow the sockets, which close only after both have
    // stopped: a server socket closed while the client still sends makes
    // the kernel answer with port-unreachable, and the client's connected
    // socket reports ECONNREFUSED.
    let (server, client) = (&server, &client);
    std::thread::scope(|s| {
        let echo = s.spawn(move || serve(server, progress));
        let client = s.spawn(move || send_and_receive(client, progress));
        let window = progress.measure(budget);
        let lost = client.join().expect("the client does not panic");
        let served = echo.join().expect("the server does not panic");
        let lost = lost?;
        served?;
        Ok(Outcome { window, lost })
    })
}

/// Echoes until the window closes.
fn serve(socket: &UdpSocket, progress: &Progress) -> std::io::Result<()> {
    while !progress.stopped() {
        let mut buffer = vec![0u8; BUFFER];
        match socket.recv_from(&mut buffer) {
            Ok((len, from)) => {
                buffer.truncate(len);
                socket.send_to(&buffer, from)?;
            }
            Err(e) if timed_out(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Sends and receives until the window closes; returns the datagrams lost.
fn send_and_receive(socket: &UdpSocket, progress: &Progress) -> std::io::Result<u64> {
    let (mut sequence, mut echoed, mut in_flight, mut lost) = (0u64, 0u64, 0usize, 0u64);
    while !progress.stopped() {
        while in_flight < WINDOW {
            let mut datagram = Vec::with_capacity(PAYLOAD);
            datagram.extend_from_slice(&sequence.to_le_bytes());
            datagram.resize(PAYLOAD, sequence as u8);
            socket.send(&datagram)?;
            sequence += 1;
            in_flight += 1;
        }
        let mut buffer = vec![0u8; BUFFER];
        match socket.recv(&mut buffer) {
            Ok(len) if len == PAYLOAD => {
                in_flight = in_flight.saturating_sub(1);
                echoed += 1;
                progress.record(0, echoed);
            }
            Ok(len) => {
                return Err(std::io::Error::other(format!(
                    "echo of {len} bytes, expected {PAYLOAD}"
                )))
            }
            Err(e) if timed_out(&e) => {
                lost += in_flight as u64;
                in_flight = 0;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(lost)
}

fn timed_out(error: &std::io::Error) -> bool {
    matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}
