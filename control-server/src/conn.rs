//! The socket of one connection, with a bound on how long a response write
//! may stay blocked: [`WriteDeadline`]. A client that sends requests but
//! never reads the answers fills the socket buffers; the write then waits
//! for the client, and after [`crate::config::Limits::write_timeout`]
//! without progress it fails, which closes the connection.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{sleep_until, Instant, Sleep};

/// A TCP stream whose writes fail with `TimedOut` after blocking for
/// `limit` without any progress. Reads pass through (the request side is
/// bounded by the header read and request timeouts).
pub(crate) struct WriteDeadline {
    stream: TcpStream,
    limit: Duration,
    /// Allocated at the first blocked write, then reset and reused.
    timer: Option<Pin<Box<Sleep>>>,
    /// Whether `timer` counts a blocked write now.
    armed: bool,
}

impl WriteDeadline {
    pub(crate) fn new(stream: TcpStream, limit: Duration) -> Self {
        Self {
            stream,
            limit,
            timer: None,
            armed: false,
        }
    }

    /// The write made progress (or failed): stop counting.
    fn progressed<T>(&mut self, result: io::Result<T>) -> Poll<io::Result<T>> {
        self.armed = false;
        Poll::Ready(result)
    }

    /// The write is blocked: start counting if not yet, and fail once the
    /// limit has passed. The timer is polled, so the task wakes at the
    /// deadline even if the socket never becomes writable.
    fn blocked<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        if !self.armed {
            let deadline = Instant::now() + self.limit;
            match &mut self.timer {
                Some(timer) => timer.as_mut().reset(deadline),
                None => self.timer = Some(Box::pin(sleep_until(deadline))),
            }
            self.armed = true;
        }
        let expired = self
            .timer
            .as_mut()
            .is_some_and(|timer| timer.as_mut().poll(cx).is_ready());
        if expired {
            self.armed = false;
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read the response within the write timeout",
            )));
        }
        Poll::Pending
    }
}

impl AsyncRead for WriteDeadline {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for WriteDeadline {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.stream).poll_write(cx, buf) {
            Poll::Ready(result) => self.progressed(result),
            Poll::Pending => self.blocked(cx),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.stream).poll_write_vectored(cx, bufs) {
            Poll::Ready(result) => self.progressed(result),
            Poll::Pending => self.blocked(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.stream).poll_flush(cx) {
            Poll::Ready(result) => self.progressed(result),
            Poll::Pending => self.blocked(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.stream).poll_shutdown(cx) {
            Poll::Ready(result) => self.progressed(result),
            Poll::Pending => self.blocked(cx),
        }
    }
}
