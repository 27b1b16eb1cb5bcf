//! Control-plane abuse over real loopback sockets: malformed request lines,
//! paths, headers and bodies, huge bodies, a flood of connections, idle and
//! slow clients, and clients that never read. Every input must get a 4xx
//! or a closed connection (the only 5xx allowed is the documented 503 for
//! a connection over the cap), never a hang or a panic; after each case the
//! sidecar must still answer `GET /healthz` and `GET /v1/caches`.
//!
//! All along, two threads of this process (whose allocator is sheafalloc)
//! allocate, fill, verify and free objects as fast as they can; after each
//! case both must have made progress and no object may have been found
//! corrupted.
//!
//! Every socket has read and write timeouts and every wait a deadline. The
//! cases run one at a time (each test starts its own sidecar), so their
//! socket counts never add up: the largest case holds about 760 file
//! descriptors.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use sheafalloc_control::{spawn, Config, ControlHandle, Limits};

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// Longest wait for one answer or one condition: a hung sidecar fails the
/// test instead of hanging it.
const IO_TIMEOUT: Duration = Duration::from_secs(15);
/// Slack allowed past a documented timeout before "closed within the
/// timeout" counts as failed (the machine may be busy).
const SLACK: Duration = Duration::from_secs(10);
/// Interval of the loops that wait for a condition (each has a deadline).
const POLL: Duration = Duration::from_millis(2);
/// The cache whose capacity the body cases try to change.
const CACHE: &str = "size-1536";

// ---------------------------------------------------------------------------
// The allocating workers.

/// Progress of the two allocating threads.
struct Workers {
    rounds: [AtomicU64; 2],
    corrupted: AtomicBool,
}

static WORKERS: Workers = Workers {
    rounds: [AtomicU64::new(0), AtomicU64::new(0)],
    corrupted: AtomicBool::new(false),
};

/// Object sizes the workers cycle through: small classes, large classes and
/// a direct mapping (above 256 KiB).
const SIZES: [usize; 8] = [16, 48, 200, 640, 2000, 7000, 30_000, 300_000];
/// Objects alive at once per round.
const BATCH: usize = 48;
/// The workers stop by themselves after this long, whatever happens.
const WORKER_LIFETIME: Duration = Duration::from_secs(300);

/// Starts the workers once per process; returns their progress.
fn workers() -> &'static Workers {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        for id in 0..2 {
            std::thread::Builder::new()
                .name(format!("alloc-worker-{id}"))
                .spawn(move || work(id))
                .expect("a worker thread");
        }
    });
    &WORKERS
}

/// Allocates a batch of objects of mixed sizes, each filled with its own
/// byte, checks every byte of every object once the whole batch is alive,
/// frees them, and counts the round.
fn work(id: usize) {
    let started = Instant::now();
    let mut objects: Vec<(Box<[u8]>, u8)> = Vec::with_capacity(BATCH);
    let mut round: u64 = 0;
    while started.elapsed() < WORKER_LIFETIME {
        for i in 0..BATCH {
            let size = SIZES[(i + round as usize) % SIZES.len()];
            let fill = (round as u8)
                .wrapping_mul(31)
                .wrapping_add(i as u8)
                .wrapping_add(id as u8 * 101);
            objects.push((vec![fill; size].into_boxed_slice(), fill));
        }
        for (object, fill) in objects.drain(..) {
            if object.iter().any(|byte| *byte != fill) {
                WORKERS.corrupted.store(true, Ordering::Relaxed);
            }
        }
        round += 1;
        WORKERS.rounds[id].store(round, Ordering::Relaxed);
    }
}

impl Workers {
    fn rounds(&self) -> [u64; 2] {
        [
            self.rounds[0].load(Ordering::Relaxed),
            self.rounds[1].load(Ordering::Relaxed),
        ]
    }

    /// Waits (bounded) until both workers have done rounds beyond
    /// `before`; asserts no object was ever found corrupted.
    fn assert_progress_since(&self, before: [u64; 2], case: &str) {
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            assert!(
                !self.corrupted.load(Ordering::Relaxed),
                "{case}: a worker found an object with wrong contents"
            );
            let now = self.rounds();
            if now[0] > before[0] && now[1] > before[1] {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{case}: the allocating threads made no progress ({before:?} -> {now:?})"
            );
            std::thread::sleep(POLL);
        }
    }
}

// ---------------------------------------------------------------------------
// A raw HTTP/1 client.

/// What came back for one request.
#[derive(Debug)]
enum Outcome {
    /// A response.
    Answer(Answer),
    /// The connection ended without a byte: EOF or reset.
    Closed(&'static str),
}

#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then_some(value.trim())
        })
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {self:?}"))
    }

    /// Asserts a JSON error body `{"error": "..."}`.
    fn assert_json_error(&self, case: &str) {
        let json = self.json();
        let object = json.as_object().expect("an object");
        assert!(
            object.len() == 1 && object["error"].is_string(),
            "{case}: not a JSON error: {json}"
        );
    }
}

impl Outcome {
    fn status(&self) -> Option<u16> {
        match self {
            Self::Answer(answer) => Some(answer.status),
            Self::Closed(_) => None,
        }
    }

    fn answer(&self, case: &str) -> &Answer {
        match self {
            Self::Answer(answer) => answer,
            Self::Closed(how) => panic!("{case}: the connection closed ({how}) without an answer"),
        }
    }

    /// Asserts exactly `status`, with a JSON error body when it is an
    /// error the API produced (not one of hyper's bare parse errors).
    fn expect(&self, status: u16, case: &str) -> &Answer {
        let answer = self.answer(case);
        assert_eq!(answer.status, status, "{case}: {answer:?}");
        answer
    }

    /// Asserts a 4xx in `allowed`, or a closed connection when
    /// `may_close`.
    fn expect_one_of(&self, allowed: &[u16], may_close: bool, case: &str) {
        match self {
            Self::Answer(answer) => assert!(
                allowed.contains(&answer.status),
                "{case}: got {} (allowed {allowed:?}): {answer:?}",
                answer.status
            ),
            Self::Closed(how) => assert!(
                may_close,
                "{case}: the connection closed ({how}); expected one of {allowed:?}"
            ),
        }
        if let Some(status) = self.status() {
            assert!((400..500).contains(&status), "{case}: {status} is no 4xx");
        }
    }
}

/// A connected socket with read and write timeouts.
fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect to the sidecar");
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    stream
}

/// Writes `bytes`; the server may answer and close before reading them all
/// (that is the point of several cases), so a failed write is no error.
/// Returns whether everything was written. Requests name the sidecar as
/// `Host: sidecar`; the real address is put in here, so the Host check
/// lets them through to what each case tests.
fn send(stream: &mut TcpStream, bytes: &[u8]) -> bool {
    let Ok(peer) = stream.peer_addr() else {
        return false;
    };
    stream.write_all(&common::aimed_at(peer, bytes)).is_ok()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// Largest answer read (the biggest real one, `/metrics`, is ~100 KiB).
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// Reads one response (by `Content-Length`, or to EOF without one). Fails
/// the test when nothing arrives within [`IO_TIMEOUT`].
fn read_answer(stream: &mut TcpStream) -> Outcome {
    let mut buffer = Vec::new();
    let mut chunk = [0_u8; 8192];
    let mut eof = false;
    loop {
        if let Some(end) = find(&buffer, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
            let status = head
                .split_whitespace()
                .nth(1)
                .and_then(|status| status.parse().ok())
                .unwrap_or_else(|| panic!("no status line in {head:?}"));
            let mut answer = Answer {
                status,
                head,
                body: Vec::new(),
            };
            assert!(
                answer.header("transfer-encoding").is_none(),
                "chunked answers are not expected: {answer:?}"
            );
            let length = answer
                .header("content-length")
                .map(|length| length.parse::<usize>().expect("a numeric Content-Length"));
            let body_start = end + 4;
            let complete = |buffer: &Vec<u8>| match length {
                Some(length) => buffer.len() >= body_start + length,
                None => false,
            };
            while !complete(&buffer) && !eof {
                match stream.read(&mut chunk) {
                    Ok(0) => eof = true,
                    Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                    Err(error) if error.kind() == ErrorKind::Interrupted => {}
                    Err(error) if is_timeout(&error) => {
                        panic!("the body of {answer:?} did not arrive within {IO_TIMEOUT:?}")
                    }
                    Err(_) => eof = true,
                }
                assert!(buffer.len() <= MAX_ANSWER_BYTES, "answer too large");
            }
            let end = length.map_or(buffer.len(), |length| body_start + length);
            assert!(buffer.len() >= end, "truncated body: {answer:?}");
            answer.body = buffer[body_start..end].to_vec();
            return Outcome::Answer(answer);
        }
        assert!(buffer.len() <= MAX_ANSWER_BYTES, "answer head too large");
        match stream.read(&mut chunk) {
            Ok(0) if buffer.is_empty() => return Outcome::Closed("eof"),
            Ok(0) => panic!("truncated answer: {:?}", String::from_utf8_lossy(&buffer)),
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) if is_timeout(&error) => {
                panic!("no answer within {IO_TIMEOUT:?} (got {buffer:?})")
            }
            Err(_) if buffer.is_empty() => return Outcome::Closed("reset"),
            Err(error) => panic!("{error} after {:?}", String::from_utf8_lossy(&buffer)),
        }
    }
}

fn is_timeout(error: &std::io::Error) -> bool {
    matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// One request on a fresh connection; one answer.
fn exchange(addr: SocketAddr, request: &[u8]) -> Outcome {
    let mut stream = connect(addr);
    send(&mut stream, request);
    read_answer(&mut stream)
}

/// Waits until the server closes `stream` (EOF or reset), reading and
/// discarding what it still sends, at most until `deadline`. Returns when
/// the close was seen, or `None` if the deadline passed first.
fn wait_closed(stream: &mut TcpStream, deadline: Instant) -> Option<Instant> {
    let mut chunk = [0_u8; 64 * 1024];
    let mut drained = 0_usize;
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match stream.read(&mut chunk) {
            Ok(0) => return Some(Instant::now()),
            Ok(n) => {
                drained += n;
                assert!(drained <= 64 << 20, "the server keeps sending");
            }
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) if is_timeout(&error) => {}
            Err(_) => return Some(Instant::now()),
        }
    }
}

/// Whether the server still holds `stream` open (nothing to read, no EOF).
fn still_open(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0_u8; 1];
    let open =
        matches!(stream.peek(&mut byte), Err(error) if error.kind() == ErrorKind::WouldBlock);
    stream.set_nonblocking(false).unwrap();
    open
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: sidecar\r\nConnection: close\r\n\r\n").into_bytes()
}

fn put_capacity(body: &[u8]) -> Vec<u8> {
    let mut request = format!(
        "PUT /v1/caches/{CACHE}/sheaf_capacity HTTP/1.1\r\nHost: sidecar\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    request
}

/// Deterministic garbage (xorshift).
fn garbage(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

// ---------------------------------------------------------------------------
// The sidecar under test.

/// The cases run one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

struct Sidecar {
    handle: ControlHandle,
}

impl Sidecar {
    fn start(limits: Limits) -> Self {
        workers();
        let config = Config::new("127.0.0.1:0".parse().unwrap()).with_limits(limits);
        Self {
            handle: spawn(config).expect("the sidecar starts on loopback"),
        }
    }

    fn addr(&self) -> SocketAddr {
        self.handle.local_addr()
    }

    /// `/healthz` and `/v1/caches` answer correctly.
    fn assert_alive(&self, case: &str) {
        let health = exchange(self.addr(), &get("/healthz"));
        let health = health.expect(200, case);
        assert_eq!(health.json(), serde_json::json!({"status": "ok"}), "{case}");
        let caches = exchange(self.addr(), &get("/v1/caches"));
        let caches = caches.expect(200, case).json();
        assert_eq!(
            caches["caches"].as_array().map(Vec::len),
            Some(sheafalloc_core::SizeClass::all().count()),
            "{case}: {caches}"
        );
    }

    /// Runs one case: the abuse, then the workers' progress and the
    /// sidecar's health.
    fn case(&self, case: &str, abuse: impl FnOnce(SocketAddr)) {
        let before = workers().rounds();
        abuse(self.addr());
        workers().assert_progress_since(before, case);
        self.assert_alive(case);
    }

    /// Sends each request on its own connection and checks the answer.
    fn each(&self, inputs: &[(&str, Vec<u8>, &[u16], bool)]) {
        for (case, request, allowed, may_close) in inputs {
            self.case(case, |addr| {
                exchange(addr, request).expect_one_of(allowed, *may_close, case);
            });
        }
    }
}

fn limits(edit: impl FnOnce(&mut Limits)) -> Limits {
    let mut limits = Limits::default();
    edit(&mut limits);
    limits
}

// ---------------------------------------------------------------------------
// The cases.

#[test]
fn malformed_request_lines_and_paths_get_4xx() {
    let _serial = serial();
    let sidecar = Sidecar::start(Limits::default());
    let mut long_path = b"GET /v1/caches/".to_vec();
    long_path.extend(std::iter::repeat_n(b'a', 64 * 1024));
    long_path.extend_from_slice(b" HTTP/1.1\r\nHost: sidecar\r\n\r\n");
    let mut long_method = vec![b'G'; 16 * 1024];
    long_method.extend_from_slice(b" /healthz HTTP/1.1\r\n\r\n");
    sidecar.each(&[
        (
            "4 KiB of random bytes",
            garbage(4096, 0x9e37_79b9_7f4a_7c15),
            &[400],
            true,
        ),
        (
            "a TLS ClientHello",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec(),
            &[400],
            true,
        ),
        (
            "a bare CRLF then garbage",
            b"\r\n\x01\x02\x03\r\n\r\n".to_vec(),
            &[400],
            true,
        ),
        (
            "invalid percent-encoding",
            get("/v1/caches/%ZZ"),
            &[404],
            false,
        ),
        (
            "percent-encoded non-UTF-8",
            get("/v1/caches/%FF%FE"),
            &[400],
            false,
        ),
        (
            "raw non-UTF-8 in the path",
            b"GET /v1/caches/\xff\xfe HTTP/1.1\r\n\r\n".to_vec(),
            &[400],
            true,
        ),
        (
            "a NUL in the path",
            b"GET /v1/caches/size-256\x00 HTTP/1.1\r\n\r\n".to_vec(),
            &[400],
            true,
        ),
        (
            "an encoded NUL in the path",
            get("/v1/caches/size-256%00"),
            &[404],
            false,
        ),
        ("a path of 64 KiB", long_path, &[431], true),
        (
            "dot segments",
            get("/v1/caches/../../healthz"),
            &[404],
            false,
        ),
        ("a cache named ..", get("/v1/caches/.."), &[404], false),
        (
            "a path without a leading slash",
            b"GET healthz HTTP/1.1\r\nHost: sidecar\r\n\r\n".to_vec(),
            // hyper reads `healthz` as an authority-form target, which
            // does not name the sidecar.
            &[400, 404, 421],
            true,
        ),
        (
            "no path at all",
            b"GET  HTTP/1.1\r\n\r\n".to_vec(),
            &[400],
            true,
        ),
        (
            "an unknown method",
            b"BREW /healthz HTTP/1.1\r\nHost: sidecar\r\nConnection: close\r\n\r\n".to_vec(),
            &[405],
            false,
        ),
        (
            "an unknown method on an unknown path",
            b"BREW /coffee HTTP/1.1\r\nHost: sidecar\r\nConnection: close\r\n\r\n".to_vec(),
            &[404],
            false,
        ),
        (
            "DELETE on the caches",
            b"DELETE /v1/caches HTTP/1.1\r\nHost: sidecar\r\nConnection: close\r\n\r\n".to_vec(),
            &[405],
            false,
        ),
        (
            "a method with invalid bytes",
            b"G(T /healthz HTTP/1.1\r\n\r\n".to_vec(),
            &[400],
            true,
        ),
        ("a method of 16 KiB", long_method, &[431], true),
        ("HTTP/0.9", b"GET /healthz\r\n".to_vec(), &[400], true),
        (
            "an unknown HTTP version",
            b"GET /healthz HTTP/9.9\r\n\r\n".to_vec(),
            &[400],
            true,
        ),
        (
            "a lower-case version",
            b"GET /healthz http/1.1\r\n\r\n".to_vec(),
            &[400],
            true,
        ),
        // Only HTTP/1 is served: the preface is refused by closing.
        (
            "the HTTP/2 preface",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00".to_vec(),
            &[],
            true,
        ),
    ]);
    sidecar.case("an h2c upgrade request is served as HTTP/1.1", |addr| {
        let request = b"GET /healthz HTTP/1.1\r\nHost: sidecar\r\nConnection: Upgrade, HTTP2-Settings, close\r\n\
                        Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n";
        let outcome = exchange(addr, request);
        let answer = outcome.expect(200, "h2c");
        assert!(answer.head.starts_with("HTTP/1.1 200"), "{answer:?}");
    });
}

#[test]
fn malformed_headers_get_4xx_or_close() {
    let _serial = serial();
    let sidecar = Sidecar::start(limits(|limits| {
        limits.request_timeout = Duration::from_secs(1);
    }));
    let mut huge_header = b"GET /healthz HTTP/1.1\r\nX-Huge: ".to_vec();
    huge_header.extend(std::iter::repeat_n(b'h', 100 * 1024));
    huge_header.extend_from_slice(b"\r\n\r\n");
    let mut many_headers = b"GET /healthz HTTP/1.1\r\n".to_vec();
    for i in 0..1000 {
        many_headers.extend_from_slice(format!("X-Header-{i}: {i}\r\n").as_bytes());
    }
    many_headers.extend_from_slice(b"\r\n");
    let put_with = |headers: &str, body: &str| {
        format!(
            "PUT /v1/caches/{CACHE}/sheaf_capacity HTTP/1.1\r\nHost: sidecar\r\nContent-Type: application/json\r\n\
             {headers}\r\n{body}"
        )
        .into_bytes()
    };
    sidecar.each(&[
        (
            "a header without a colon",
            b"GET /healthz HTTP/1.1\r\nHost sidecar\r\n\r\n".to_vec(),
            &[400],
            true,
        ),
        (
            "a header name with a space",
            b"GET /healthz HTTP/1.1\r\nBad Name: x\r\n\r\n".to_vec(),
            &[400],
            true,
        ),
        (
            "a control byte in a header value",
            b"GET /healthz HTTP/1.1\r\nX-Bad: a\x01b\r\n\r\n".to_vec(),
            &[400],
            true,
        ),
        (
            "a NUL in a header value",
            b"GET /healthz HTTP/1.1\r\nX-Bad: a\x00b\r\n\r\n".to_vec(),
            &[400],
            true,
        ),
        (
            "an obsolete folded header",
            b"GET /healthz HTTP/1.1\r\nX-Fold: a\r\n b\r\n\r\n".to_vec(),
            &[400],
            true,
        ),
        ("a header of 100 KiB", huge_header, &[431], true),
        ("1000 headers", many_headers, &[431], true),
        (
            "a non-numeric Content-Length",
            put_with("Content-Length: abc\r\n", ""),
            &[400],
            true,
        ),
        (
            "a negative Content-Length",
            put_with("Content-Length: -1\r\n", ""),
            &[400],
            true,
        ),
        (
            "an overflowing Content-Length",
            put_with("Content-Length: 99999999999999999999999\r\n", ""),
            &[400],
            true,
        ),
        (
            "two different Content-Lengths",
            put_with("Content-Length: 2\r\nContent-Length: 3\r\n", "{}"),
            &[400],
            true,
        ),
        (
            "a Content-Length list",
            put_with("Content-Length: 2, 3\r\n", "{}"),
            &[400],
            true,
        ),
        (
            "Content-Length and chunked together",
            put_with(
                "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
                "0\r\n\r\n",
            ),
            &[400],
            true,
        ),
        (
            "a transfer coding other than chunked",
            put_with("Transfer-Encoding: gzip\r\n", "{}"),
            &[400],
            true,
        ),
        (
            "a non-hex chunk size",
            put_with("Transfer-Encoding: chunked\r\n", "zz\r\n{}\r\n0\r\n\r\n"),
            &[400],
            true,
        ),
        (
            "an overflowing chunk size",
            put_with(
                "Transfer-Encoding: chunked\r\n",
                "fffffffffffffffffffff\r\n{}\r\n0\r\n\r\n",
            ),
            &[400],
            true,
        ),
        (
            "a chunk longer than its size",
            put_with(
                "Transfer-Encoding: chunked\r\n",
                "2\r\n{\"sheaf\r\n0\r\n\r\n",
            ),
            &[400],
            true,
        ),
        (
            "a chunk size with garbage after it",
            put_with("Transfer-Encoding: chunked\r\n", "2\x01\r\n{}\r\n0\r\n\r\n"),
            &[400],
            true,
        ),
        // The body ends early: the server waits for the rest, then 408.
        (
            "a body shorter than its Content-Length",
            put_with("Content-Length: 100\r\n", "{\"sheaf_capacity\""),
            &[408],
            false,
        ),
        (
            "a chunked body that never ends",
            put_with("Transfer-Encoding: chunked\r\n", "2\r\n{}\r\n"),
            &[408],
            false,
        ),
    ]);
    sidecar.case("a body longer than its Content-Length", |addr| {
        // The extra bytes are read as the next request, which is garbage.
        let mut stream = connect(addr);
        let request = format!(
            "PUT /v1/caches/{CACHE}/sheaf_capacity HTTP/1.1\r\nHost: sidecar\r\nContent-Type: application/json\r\n\
             Content-Length: 5\r\n\r\n{{\"sheaf_capacity\": 1}}"
        );
        send(&mut stream, request.as_bytes());
        read_answer(&mut stream)
            .expect(400, "the declared part")
            .assert_json_error("the declared part");
        read_answer(&mut stream).expect_one_of(&[400], true, "the extra bytes");
    });
    sidecar.case("a GET that declares a body and never sends it", |addr| {
        // The handler does not read bodies: it answers, and the
        // connection, whose body was not read, closes.
        let mut stream = connect(addr);
        send(
            &mut stream,
            b"GET /v1/caches/size-256 HTTP/1.1\r\nHost: sidecar\r\nContent-Length: 100\r\n\r\n",
        );
        read_answer(&mut stream).expect(200, "the answer");
        let deadline = Instant::now() + IO_TIMEOUT;
        assert!(wait_closed(&mut stream, deadline).is_some(), "not closed");
    });
    sidecar.case("a body sent one byte every 200 ms", |addr| {
        // The clock starts before the connection: the server's body
        // timeout starts after it whatever the scheduler does between
        // here and the head's arrival, so the lower bound below holds.
        let started = Instant::now();
        let mut stream = connect(addr);
        let body = br#"{"sheaf_capacity": 1}"#;
        let head = format!(
            "PUT /v1/caches/{CACHE}/sheaf_capacity HTTP/1.1\r\nHost: sidecar\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        );
        send(&mut stream, head.as_bytes());
        let writer = stream.try_clone().unwrap();
        let trickle = std::thread::spawn(move || {
            let mut writer = writer;
            for byte in body {
                // The pace of a slow client, not a wait for a condition.
                std::thread::sleep(Duration::from_millis(200));
                if writer.write_all(&[*byte]).is_err() {
                    return;
                }
            }
        });
        let outcome = read_answer(&mut stream);
        let answer = outcome.expect(408, "slow body");
        answer.assert_json_error("slow body");
        assert!(
            started.elapsed() >= Duration::from_secs(1),
            "408 before the timeout"
        );
        assert!(
            started.elapsed() < Duration::from_secs(1) + SLACK,
            "408 late"
        );
        trickle.join().unwrap();
    });
}

/// Total size of the huge bodies.
const HUGE_BODY_BYTES: usize = 10 << 20;
/// What is sent of a huge body before the answer must be there.
const FIRST_PIECE_BYTES: usize = 64 * 1024;

/// Sends the head of a huge body and its first piece, expects the 413
/// then, and goes on streaming the rest until the server's close stops it.
/// Returns the bytes of body written in all.
fn stream_huge_body(addr: SocketAddr, chunked: bool, case: &str) -> usize {
    let mut stream = connect(addr);
    let framing = if chunked {
        "Transfer-Encoding: chunked".to_owned()
    } else {
        format!("Content-Length: {HUGE_BODY_BYTES}")
    };
    let head = format!(
        "PUT /v1/caches/{CACHE}/sheaf_capacity HTTP/1.1\r\nHost: sidecar\r\nContent-Type: application/json\r\n{framing}\r\n\r\n"
    );
    assert!(send(&mut stream, head.as_bytes()));
    let piece = |bytes: usize| {
        let mut piece = Vec::with_capacity(bytes + 16);
        if chunked {
            piece.extend_from_slice(format!("{bytes:x}\r\n").as_bytes());
        }
        piece.extend(std::iter::repeat_n(b'[', bytes));
        if chunked {
            piece.extend_from_slice(b"\r\n");
        }
        piece
    };
    // The answer must come now, with 10 MiB - 64 KiB still unsent.
    assert!(send(&mut stream, &piece(FIRST_PIECE_BYTES)));
    let outcome = read_answer(&mut stream);
    outcome.expect(413, case).assert_json_error(case);
    let mut sent = FIRST_PIECE_BYTES;
    let rest = piece(FIRST_PIECE_BYTES);
    stream
        .set_write_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    while sent < HUGE_BODY_BYTES {
        if stream.write_all(&rest).is_err() {
            break;
        }
        sent += FIRST_PIECE_BYTES;
    }
    sent
}

#[test]
fn bad_and_huge_bodies_get_4xx() {
    let _serial = serial();
    let sidecar = Sidecar::start(Limits::default());
    let before = exchange(sidecar.addr(), &get(&format!("/v1/caches/{CACHE}")))
        .expect(200, "the capacity before")
        .json()["sheaf_capacity"]
        .as_u64()
        .unwrap();
    for chunked in [false, true] {
        let case = if chunked {
            "a chunked body of 10 MiB"
        } else {
            "a declared body of 10 MiB"
        };
        sidecar.case(case, |addr| {
            let sent = stream_huge_body(addr, chunked, case);
            assert!(
                sent < HUGE_BODY_BYTES,
                "{case}: the server took the whole body ({sent} bytes) after its 413"
            );
        });
    }
    sidecar.case("10 MiB declared with Expect: 100-continue", |addr| {
        let mut stream = connect(addr);
        let head = format!(
            "PUT /v1/caches/{CACHE}/sheaf_capacity HTTP/1.1\r\nHost: sidecar\r\nContent-Type: application/json\r\n\
             Content-Length: {HUGE_BODY_BYTES}\r\nExpect: 100-continue\r\n\r\n"
        );
        send(&mut stream, head.as_bytes());
        // 413 at once: no `100 Continue` first.
        read_answer(&mut stream).expect(413, "expect-continue");
    });
    let deep = |depth: usize| "[".repeat(depth).into_bytes();
    let mut chunked_deep = format!(
        "PUT /v1/caches/{CACHE}/sheaf_capacity HTTP/1.1\r\nHost: sidecar\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n",
        100_000
    )
    .into_bytes();
    chunked_deep.extend(deep(100_000));
    chunked_deep.extend_from_slice(b"\r\n0\r\n\r\n");
    let mut deep_objects = Vec::new();
    for _ in 0..800 {
        deep_objects.extend_from_slice(br#"{"a":"#);
    }
    sidecar.each(&[
        (
            "100k nested arrays, declared",
            put_capacity(&deep(100_000)),
            &[413],
            false,
        ),
        ("100k nested arrays, chunked", chunked_deep, &[413], false),
        (
            "4000 nested arrays (under the size limit)",
            put_capacity(&deep(4000)),
            &[400],
            false,
        ),
        (
            "800 nested objects (under the size limit)",
            put_capacity(&deep_objects),
            &[400],
            false,
        ),
        ("an empty body", put_capacity(b""), &[400], false),
        (
            "not JSON",
            put_capacity(b"sheaf_capacity=64"),
            &[400],
            false,
        ),
        (
            "truncated JSON",
            put_capacity(br#"{"sheaf_capacity": "#),
            &[400],
            false,
        ),
        (
            "JSON then garbage",
            put_capacity(br#"{"sheaf_capacity": 64} x"#),
            &[400],
            false,
        ),
        (
            "two JSON objects",
            put_capacity(br#"{"sheaf_capacity": 64}{"sheaf_capacity": 65}"#),
            &[400],
            false,
        ),
        (
            "invalid UTF-8 in a string",
            put_capacity(b"{\"sheaf_capacity\": \"\xff\"}"),
            &[400],
            false,
        ),
        (
            "a NUL in the body",
            put_capacity(b"{\"sheaf_capacity\": 6\x004}"),
            &[400],
            false,
        ),
        (
            "a string capacity",
            put_capacity(br#"{"sheaf_capacity": "64"}"#),
            &[400],
            false,
        ),
        (
            "a null capacity",
            put_capacity(br#"{"sheaf_capacity": null}"#),
            &[400],
            false,
        ),
        (
            "a boolean capacity",
            put_capacity(br#"{"sheaf_capacity": true}"#),
            &[400],
            false,
        ),
        (
            "a fractional capacity",
            put_capacity(br#"{"sheaf_capacity": 1.5}"#),
            &[400],
            false,
        ),
        ("an array body", put_capacity(b"[64]"), &[400], false),
        ("a bare number", put_capacity(b"64"), &[400], false),
        (
            "an unknown field",
            put_capacity(br#"{"sheaf_capacity": 64, "x": 1}"#),
            &[400],
            false,
        ),
        (
            "a duplicate field",
            put_capacity(br#"{"sheaf_capacity": 64, "sheaf_capacity": 65}"#),
            &[400],
            false,
        ),
        (
            "a number beyond f64",
            put_capacity(br#"{"sheaf_capacity": 1e400}"#),
            &[400],
            false,
        ),
        (
            "a negative capacity",
            put_capacity(br#"{"sheaf_capacity": -1}"#),
            &[422],
            false,
        ),
        (
            "zero",
            put_capacity(br#"{"sheaf_capacity": 0}"#),
            &[422],
            false,
        ),
        (
            "2^64",
            put_capacity(br#"{"sheaf_capacity": 18446744073709551616}"#),
            &[422],
            false,
        ),
        (
            "a body of 4097 bytes",
            put_capacity(&[b' '; 4097]),
            &[413],
            false,
        ),
    ]);
    let after = exchange(sidecar.addr(), &get(&format!("/v1/caches/{CACHE}")))
        .expect(200, "the capacity after")
        .json()["sheaf_capacity"]
        .as_u64()
        .unwrap();
    assert_eq!(after, before, "a refused body changed the capacity");
}

#[test]
fn a_flood_of_connections_is_answered_or_refused() {
    const SOCKETS: usize = 500;
    let _serial = serial();
    let cap = Limits::default().max_connections;
    let sidecar = Sidecar::start(Limits::default());
    sidecar.case("500 connections at once, one request each", |addr| {
        let started = workers().rounds();
        let mut sockets: Vec<TcpStream> = (0..SOCKETS).map(|_| connect(addr)).collect();
        // The server accepts in connection order, and the first `cap`
        // connections, which have sent nothing yet, hold every slot: the
        // last connection is refused.
        let last = sockets.last_mut().unwrap();
        send(last, &get("/healthz"));
        match read_answer(last) {
            Outcome::Answer(answer) => assert_eq!(answer.status, 503, "{answer:?}"),
            Outcome::Closed(_) => {}
        }
        for stream in &mut sockets[..SOCKETS - 1] {
            send(stream, &get("/healthz"));
        }
        let (mut ok, mut refused, mut closed) = (0, 0, 0);
        for stream in &mut sockets[..SOCKETS - 1] {
            match read_answer(stream) {
                Outcome::Answer(answer) if answer.status == 200 => ok += 1,
                Outcome::Answer(answer) if answer.status == 503 => {
                    answer.assert_json_error("refusal");
                    assert_eq!(answer.header("retry-after"), Some("1"), "{answer:?}");
                    assert_eq!(answer.header("connection"), Some("close"), "{answer:?}");
                    refused += 1;
                }
                Outcome::Answer(answer) => panic!("unexpected answer {answer:?}"),
                Outcome::Closed(_) => closed += 1,
            }
        }
        // Exactly the first `cap` were served; every other one was refused
        // with a 503 (or, at worst, a reset after it).
        assert_eq!(ok, cap, "{refused} refused, {closed} closed");
        assert_eq!(refused + closed, SOCKETS - 1 - cap);
        assert!(refused > 0, "no refusal carried its 503");
        workers().assert_progress_since(started, "during the flood");
    });
    sidecar.case("2000 connections opened and dropped at once", |addr| {
        for _ in 0..4 {
            let sockets: Vec<TcpStream> = (0..SOCKETS).map(|_| connect(addr)).collect();
            drop(sockets);
        }
    });
}

#[test]
fn connections_over_the_cap_get_503_until_one_is_free() {
    const CAP: usize = 8;
    let _serial = serial();
    let sidecar = Sidecar::start(limits(|limits| limits.max_connections = CAP));
    sidecar.case("a connection over the cap", |addr| {
        // Accepted in order: these take every slot and send nothing.
        let idle: Vec<TcpStream> = (0..CAP).map(|_| connect(addr)).collect();
        let outcome = exchange(addr, &get("/healthz"));
        let answer = outcome.expect(503, "over the cap");
        answer.assert_json_error("over the cap");
        assert!(String::from_utf8_lossy(&answer.body).contains("at most 8 connections"));
        // Closing them frees the slots.
        drop(idle);
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            match exchange(addr, &get("/healthz")).status() {
                Some(200) => break,
                Some(503) | None => {}
                Some(other) => panic!("unexpected status {other}"),
            }
            assert!(Instant::now() < deadline, "the slots were never freed");
            std::thread::sleep(POLL);
        }
    });
}

#[test]
fn idle_and_slow_clients_are_closed_by_the_header_timeout() {
    const IDLE: usize = 200;
    let timeout = Duration::from_secs(3);
    let _serial = serial();
    let sidecar = Sidecar::start(limits(|limits| limits.header_read_timeout = timeout));
    sidecar.case(
        "200 idle connections, a slow loris and an idle keep-alive",
        |addr| {
            let started = workers().rounds();
            // Each with the time before its connect: the server's clock for it
            // cannot start earlier.
            let mut idle: Vec<(TcpStream, Instant)> = (0..IDLE)
                .map(|_| {
                    let before = Instant::now();
                    (connect(addr), before)
                })
                .collect();

            // The slow loris: one byte of a header every 200 ms, never the end.
            let loris_started = Instant::now();
            let mut loris = connect(addr);
            let loris_writer = loris.try_clone().unwrap();
            let loris_bytes = Arc::new(AtomicU64::new(0));
            let loris_done = Arc::new(AtomicBool::new(false));
            let trickle = {
                let loris_bytes = Arc::clone(&loris_bytes);
                let loris_done = Arc::clone(&loris_done);
                std::thread::spawn(move || {
                    let mut writer = loris_writer;
                    let bytes = b"GET /healthz HTTP/1.1\r\nX-Slow: "
                        .iter()
                        .chain(std::iter::repeat(&b'z'));
                    for byte in bytes {
                        if loris_done.load(Ordering::Relaxed)
                            || loris_started.elapsed() > timeout + SLACK
                            || writer.write_all(&[*byte]).is_err()
                        {
                            return;
                        }
                        loris_bytes.fetch_add(1, Ordering::Relaxed);
                        // The pace of a slow client, not a wait for a condition.
                        std::thread::sleep(Duration::from_millis(200));
                    }
                })
            };

            // A keep-alive connection that goes idle after one request.
            let mut keep_alive = connect(addr);
            let keep_alive_sent = Instant::now();
            send(
                &mut keep_alive,
                b"GET /healthz HTTP/1.1\r\nHost: sidecar\r\n\r\n",
            );
            read_answer(&mut keep_alive).expect(200, "keep-alive request");

            // Meanwhile a fresh connection is served at once: the first idle
            // connection, which closes first, is still open afterwards.
            for _ in 0..3 {
                exchange(addr, &get("/healthz")).expect(200, "healthz amid idle connections");
            }
            assert!(
                still_open(&idle[0].0),
                "healthz waited for the idle connections to time out"
            );

            // Every idle connection is closed by the server, not before the
            // timeout and not long after it.
            let deadline = Instant::now() + timeout + SLACK;
            let mut closed = 0;
            for (stream, connected) in &mut idle {
                let at = wait_closed(stream, deadline).unwrap_or_else(|| {
                    panic!("{closed} of {IDLE} idle connections closed in time")
                });
                assert!(
                    at >= *connected + timeout,
                    "closed before the timeout: {closed} after {:?}",
                    at - *connected
                );
                closed += 1;
            }
            assert_eq!(closed, IDLE);

            let at = wait_closed(&mut loris, deadline).expect("the slow loris was not closed");
            loris_done.store(true, Ordering::Relaxed);
            assert!(
                at >= loris_started + timeout,
                "loris closed before the timeout"
            );
            trickle.join().unwrap();
            let trickled = loris_bytes.load(Ordering::Relaxed);
            assert!(trickled >= 5, "the loris sent only {trickled} bytes");

            let at = wait_closed(&mut keep_alive, deadline).expect("keep-alive not closed");
            assert!(at >= keep_alive_sent + timeout, "keep-alive closed early");

            workers().assert_progress_since(started, "while idle connections were held");
        },
    );
}

#[test]
fn clients_that_do_not_read_are_cut_off_by_the_write_timeout() {
    const REQUESTS: usize = 3000;
    let _serial = serial();
    let sidecar = Sidecar::start(limits(|limits| {
        // One slot: while the stalled connection holds it, others get 503.
        limits.max_connections = 1;
        limits.write_timeout = Duration::from_secs(2);
    }));
    sidecar.case("pipelined requests whose answers are never read", |addr| {
        let mut stalled = connect(addr);
        let mut writer = stalled.try_clone().unwrap();
        // Each answer is ~56 KiB: far more than the socket buffers hold.
        let pipeline = common::aimed_at(
            addr,
            &b"GET /v1/caches HTTP/1.1\r\nHost: sidecar\r\n\r\n".repeat(REQUESTS),
        );
        let sender = std::thread::spawn(move || {
            let _ = writer.write_all(&pipeline);
        });
        // The stalled connection holds the only slot...
        exchange(addr, &get("/healthz")).expect(503, "while stalled");
        // ...until the write timeout closes it.
        let deadline = Instant::now() + Duration::from_secs(2) + SLACK;
        loop {
            match exchange(addr, &get("/healthz")).status() {
                Some(200) => break,
                Some(503) | None => {}
                Some(other) => panic!("unexpected status {other}"),
            }
            assert!(
                Instant::now() < deadline,
                "the stalled connection was never cut"
            );
            std::thread::sleep(POLL);
        }
        assert!(
            wait_closed(&mut stalled, Instant::now() + IO_TIMEOUT).is_some(),
            "the stalled connection is still open"
        );
        sender.join().unwrap();
    });
}

#[test]
fn shutdown_is_bounded_whatever_the_clients_hold() {
    let _serial = serial();
    let sidecar = Sidecar::start(Limits::default());
    let addr = sidecar.addr();
    let before = workers().rounds();
    let mut idle: Vec<TcpStream> = (0..50).map(|_| connect(addr)).collect();
    // A head that never ends (the header timeout, 10 s, outlasts the
    // shutdown's grace).
    let mut partial = connect(addr);
    send(&mut partial, b"GET /healthz HTTP/1.1\r\nX-Partial: ");
    // A response write that never ends (the write timeout, 10 s, too).
    let mut stalled = connect(addr);
    let mut writer = stalled.try_clone().unwrap();
    let pipeline = common::aimed_at(
        addr,
        &b"GET /v1/caches HTTP/1.1\r\nHost: sidecar\r\n\r\n".repeat(3000),
    );
    let sender = std::thread::spawn(move || {
        let _ = writer.write_all(&pipeline);
    });
    // Accepted in order: once this is answered, all the above are held.
    exchange(addr, &get("/healthz")).expect(200, "before the shutdown");

    let started = Instant::now();
    sidecar.handle.shutdown().expect("a clean stop");
    let took = started.elapsed();
    assert!(
        took < sheafalloc_control::server::SHUTDOWN_GRACE + SLACK,
        "the shutdown took {took:?}"
    );
    let deadline = Instant::now() + IO_TIMEOUT;
    for stream in idle.iter_mut().chain([&mut partial, &mut stalled]) {
        assert!(
            wait_closed(stream, deadline).is_some(),
            "a connection outlived the sidecar"
        );
    }
    sender.join().unwrap();
    assert!(TcpStream::connect(addr).is_err(), "still listening");
    workers().assert_progress_since(before, "shutdown");
}
