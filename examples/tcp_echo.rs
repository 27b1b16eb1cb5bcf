//! A TCP echo server with the one-line swap. Each read lands in a freshly
//! allocated buffer that is written back and dropped.
//!
//! `tcp_echo [addr] [seconds]` (default 127.0.0.1:7000, run until killed).
//! With `SHEAFALLOC_CONTROL_ADDR=127.0.0.1:9187` the control plane starts
//! too; no other code is involved.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:7000".into());
    let seconds: Option<u64> = args.next().and_then(|s| s.parse().ok());
    let listener = TcpListener::bind(&addr).await?;
    println!("tcp_echo listening on {}", listener.local_addr()?);
    let server = async move {
        loop {
            let (mut stream, _) = listener.accept().await?;
            tokio::spawn(async move {
                loop {
                    let mut buffer = vec![0u8; 2048];
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            buffer.truncate(n);
                            if stream.write_all(&buffer).await.is_err() {
                                break;
                            }
                        }
                    }
                }
            });
        }
        #[allow(unreachable_code)]
        Ok::<(), std::io::Error>(())
    };
    match seconds {
        Some(seconds) => {
            let _ = tokio::time::timeout(Duration::from_secs(seconds), server).await;
            Ok(())
        }
        None => server.await,
    }
}
