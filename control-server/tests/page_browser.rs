//! The live page in a real browser: headless Chromium, driven over the
//! W3C WebDriver protocol by chromedriver (Debian's `chromium` and
//! `chromium-driver`, which `scripts/setup.sh` installs), renders the page
//! of a real sidecar while two threads of this process allocate through
//! sheafalloc. The test reads the rendered DOM — rows of live caches with
//! figures that match the JSON API — then changes a capacity through the
//! page's form, as a person would (click, type, click), and checks that
//! the sidecar applied it; a refused value must show the server's message.
//! The page reports script errors on itself, and any is a failure; a page
//! whose script does not run renders no rows, which fails too.
//!
//! `SHEAFALLOC_PAGE_SCREENSHOT=docs/control-page.png` also saves a
//! screenshot of the rendered page there. `SHEAFALLOC_CHROMIUM` and
//! `SHEAFALLOC_CHROMEDRIVER` name other binaries.

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::{client, sidecar, Client, Expect, Method};
use serde_json::{json, Value};
use sheafalloc_control::client::CapacitySetting;

#[global_allocator]
static GLOBAL: sheafalloc::SheafAlloc = sheafalloc::SheafAlloc::new();

/// Longest wait for any condition in the browser.
const DEADLINE: Duration = Duration::from_secs(60);
/// The busiest cache of the workload.
const BUSY: &str = "size-256";
/// The cache whose capacity the page changes.
const TUNED: &str = "size-1024";

/// One browser at a time (the machine may have two cores).
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Two threads allocating bursts of 256, 1000 and 2112 bytes until
/// dropped.
struct Workload {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Workload {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..2)
            .map(|id| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let started = Instant::now();
                    let mut burst: Vec<Vec<u8>> = Vec::with_capacity(300);
                    while !stop.load(Ordering::Relaxed) && started.elapsed() < 3 * DEADLINE {
                        for i in 0..300 {
                            let size = match i % 4 {
                                0 => 2112,
                                1 => 1000,
                                _ => 256,
                            };
                            burst.push(vec![(i + id) as u8; size]);
                        }
                        burst.clear();
                        // A service's pace, not a wait for a condition: the
                        // page should see rates, not a machine at 100%.
                        std::thread::sleep(Duration::from_millis(1));
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// A binary from the environment variable, else the first of `names` on
/// the PATH.
fn binary(variable: &str, names: &[&str]) -> PathBuf {
    if let Some(path) = std::env::var_os(variable) {
        return PathBuf::from(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in names {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "{} not found: install Debian's chromium and chromium-driver (bash scripts/setup.sh) \
         or set {variable}",
        names.join(" or ")
    );
}

/// chromedriver on a free loopback port, killed at drop.
struct Driver {
    child: Child,
    client: Client,
}

impl Driver {
    fn start() -> Self {
        let mut child = Command::new(binary("SHEAFALLOC_CHROMEDRIVER", &["chromedriver"]))
            .args(["--port=0", "--allowed-ips=127.0.0.1", "--log-level=WARNING"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("chromedriver starts");
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + DEADLINE;
        let port = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = lines
                .recv_timeout(left)
                .unwrap_or_else(|error| panic!("chromedriver printed no port: {error}"));
            if let Some(rest) = line.split("started successfully on port ").nth(1) {
                break rest.trim_end_matches('.').trim().to_owned();
            }
        };
        let client = Client::new(&format!("127.0.0.1:{port}"))
            .unwrap()
            .with_timeout(DEADLINE);
        Self { child, client }
    }

    /// A WebDriver command; its `value`.
    fn command(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        let call = self.client.call(method.clone(), path);
        let call = match body {
            Some(body) => call.json(body.to_string()),
            None => call,
        };
        let reply = call.send().expect("chromedriver answers");
        let value = reply.value();
        assert_eq!(reply.status, 200, "{method} {path}: {value}");
        value["value"].clone()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A browser session, closed at drop.
struct Browser<'a> {
    driver: &'a Driver,
    session: String,
    profile: PathBuf,
}

impl<'a> Browser<'a> {
    fn open(driver: &'a Driver) -> Self {
        let profile = std::env::temp_dir().join(format!(
            "sheafalloc-page-test-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_nanos())
        ));
        let _ = std::fs::remove_dir_all(&profile);
        std::fs::create_dir_all(&profile).unwrap();
        let chromium = binary("SHEAFALLOC_CHROMIUM", &["chromium", "chromium-browser"]);
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--no-proxy-server".to_owned(),
            "--window-size=1440,1000".to_owned(),
            format!("--user-data-dir={}", profile.display()),
        ];
        let capabilities = json!({
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {
                        "binary": chromium.to_string_lossy(),
                        "args": args,
                    },
                },
            },
        });
        let session = driver.command(Method::POST, "/session", Some(capabilities));
        let session = session["sessionId"]
            .as_str()
            .expect("a session id")
            .to_owned();
        Self {
            driver,
            session,
            profile,
        }
    }

    fn command(&self, method: Method, path: &str, body: Option<Value>) -> Value {
        self.driver
            .command(method, &format!("/session/{}{path}", self.session), body)
    }

    fn go(&self, url: &str) {
        self.command(Method::POST, "/url", Some(json!({ "url": url })));
    }

    /// Runs `script` (a function body) in the page; its return value.
    fn script(&self, script: &str) -> Value {
        self.command(
            Method::POST,
            "/execute/sync",
            Some(json!({ "script": script, "args": [] })),
        )
    }

    /// The element `selector` matches.
    fn element(&self, selector: &str) -> String {
        let found = self.command(
            Method::POST,
            "/element",
            Some(json!({ "using": "css selector", "value": selector })),
        );
        found
            .as_object()
            .and_then(|object| object.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {selector}: {found}"))
            .to_owned()
    }

    fn click(&self, selector: &str) {
        let element = self.element(selector);
        self.command(
            Method::POST,
            &format!("/element/{element}/click"),
            Some(json!({})),
        );
    }

    fn type_into(&self, selector: &str, text: &str) {
        let element = self.element(selector);
        self.command(
            Method::POST,
            &format!("/element/{element}/clear"),
            Some(json!({})),
        );
        self.command(
            Method::POST,
            &format!("/element/{element}/value"),
            Some(json!({ "text": text })),
        );
    }

    /// Polls `script` until `done` holds for its value; returns it.
    fn wait_for(&self, what: &str, script: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let errors = self.script(
                "return document.body.dataset.errors === '0' ? null \
                 : document.getElementById('errors').textContent",
            );
            assert!(
                errors.is_null(),
                "{what}: the page's script failed: {errors}"
            );
            let value = self.script(script);
            if done(&value) {
                return value;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not seen within {DEADLINE:?}; last: {value}; page status: {}",
                self.script("return document.getElementById('status').textContent")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn screenshot(&self) -> Vec<u8> {
        let encoded = self.command(Method::GET, "/screenshot", None);
        base64::engine::general_purpose::STANDARD
            .decode(encoded.as_str().expect("base64 text"))
            .expect("a base64 screenshot")
    }
}

impl Drop for Browser<'_> {
    fn drop(&mut self) {
        let _ = self
            .driver
            .client
            .call(Method::DELETE, &format!("/session/{}", self.session))
            .send();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// The table as the page rendered it: every row's cells by field.
const ROWS: &str = "return Array.from(document.querySelectorAll('#rows tr[data-cache]')).map(row => {
    const cells = {};
    for (const cell of row.querySelectorAll('td[data-field]')) cells[cell.dataset.field] = cell.textContent;
    cells.name = row.dataset.cache;
    cells.classes = row.querySelector('td[data-field=\"slow-share\"]').className;
    return cells;
});";

/// A script returning the capacity cell of `cache`'s row, or null.
fn capacity_cell(cache: &str) -> String {
    format!(
        "const cell = document.querySelector('#rows tr[data-cache=\"{cache}\"] td[data-field=\"capacity\"]');
         return cell ? cell.textContent : null;"
    )
}

/// `12.3k` -> 12300.
fn rate(text: &str) -> f64 {
    let (number, factor) = match text.chars().last() {
        Some('k') => (&text[..text.len() - 1], 1e3),
        Some('M') => (&text[..text.len() - 1], 1e6),
        Some('G') => (&text[..text.len() - 1], 1e9),
        _ => (text, 1.0),
    };
    number
        .parse::<f64>()
        .map_or(f64::NAN, |value| value * factor)
}

#[test]
fn the_page_shows_live_caches_and_changes_a_capacity_in_a_real_browser() {
    let _serial = serial();
    let _workload = Workload::start();
    let handle = sidecar(None);
    let api = client(&handle);
    let driver = Driver::start();
    let browser = Browser::open(&driver);
    browser.go(&format!("{}/", handle.url()));
    // The document is loaded when `go` returns and the script is deferred
    // to right after it: it runs now, or never (a syntax error).
    let running = browser.script("return document.body.dataset.script || null");
    assert_eq!(running, "running", "the page's script did not run");

    // Two refreshes, so rates over an interval are shown, and the busy
    // cache among the rows with a rate above zero.
    let rows = browser.wait_for(
        "live rows with rates",
        &format!(
            "{ROWS_BODY}
             const refreshes = Number(document.body.dataset.refreshes);
             return refreshes >= 2 ? rows : null;",
            ROWS_BODY = ROWS.replacen("return ", "const rows = ", 1)
        ),
        |rows| {
            rows.as_array().is_some_and(|rows| {
                rows.iter().any(|row| {
                    row["name"] == BUSY && rate(row["alloc-rate"].as_str().unwrap_or("")) > 0.0
                })
            })
        },
    );
    let rows = rows.as_array().unwrap();
    assert_eq!(browser.script("return document.body.dataset.errors"), "0");
    assert_eq!(
        browser.script("return document.getElementById('errors').hidden"),
        true
    );

    // The figures are the API's. The auto-tuner may move the busy cache's
    // capacity between the page's last refresh and this request, so the
    // page must come to show what the API says, within the deadline.
    let busy = rows.iter().find(|row| row["name"] == BUSY).unwrap();
    browser.wait_for(
        "the busy cache's capacity as the API gives it",
        &capacity_cell(BUSY),
        |shown| {
            let from_api = api.cache(BUSY).unwrap().sheaf_capacity;
            shown == &Value::String(from_api.to_string())
        },
    );
    let slow = busy["slow-share"].as_str().unwrap();
    assert!(
        slow.ends_with('%') && slow[..slow.len() - 1].parse::<f64>().is_ok(),
        "{busy}"
    );
    let barn = busy["barn-hits"].as_str().unwrap();
    assert!(barn.ends_with('%') || barn == "\u{2013}", "{busy}");
    assert!(
        busy["held-bytes"].as_str().unwrap().ends_with("iB"),
        "{busy}"
    );
    assert!(
        !busy["classes"].as_str().unwrap().contains("cumulative"),
        "{busy}"
    );
    // Nobody pinned the busy cache: the auto-tuner has it.
    assert_eq!(busy["tuning"], "auto", "{busy}");
    // Busiest first.
    let rates: Vec<f64> = rows
        .iter()
        .map(|row| rate(row["alloc-rate"].as_str().unwrap_or("")))
        .collect();
    assert!(
        rates
            .windows(2)
            .all(|pair| pair[0] >= pair[1] || pair[1].is_nan()),
        "not sorted by rate: {rates:?}"
    );
    // Only caches in use, unless asked for all of them.
    assert!(
        rows.len() < sheafalloc_core::size_class::NUM_CLASSES,
        "{} rows",
        rows.len()
    );
    let threads = browser.script("return document.getElementById('sum-threads').textContent");
    assert!(threads.as_str().unwrap().contains("live"), "{threads}");

    // Change a capacity through the form, as a person would. The cache is
    // pinned at its current capacity first, so the tuner cannot move it
    // between this read and the page's request.
    let before = api.cache(TUNED).unwrap().sheaf_capacity;
    let pinned = api
        .set_capacity(TUNED, CapacitySetting::Pinned(before.into()))
        .unwrap();
    assert_eq!(
        (pinned.sheaf_capacity, pinned.tuning),
        (before, sheafalloc::Tuning::Pinned)
    );
    let target = if before == 37 { 38 } else { 37 };
    browser.click(&format!("button[data-cache=\"{TUNED}\"]"));
    browser.type_into("#cap-value", &target.to_string());
    browser.click("#cap-set");
    let result = browser.wait_for(
        "the capacity change confirmed",
        "const out = document.getElementById('cap-result');
         return out.dataset.state === 'pending' ? null : [out.dataset.state, out.textContent];",
        |value| !value.is_null(),
    );
    assert_eq!(result[0], "ok", "{result}");
    assert!(
        result[1]
            .as_str()
            .unwrap()
            .contains(&format!("{before} \u{2192} {target}")),
        "{result}"
    );
    assert_eq!(
        api.cache(TUNED).unwrap().sheaf_capacity,
        u32::try_from(target).unwrap()
    );

    // The table follows: the new capacity shows at the next refresh.
    browser.wait_for(
        "the new capacity in the table",
        &capacity_cell(TUNED),
        |value| value == &Value::String(target.to_string()),
    );
    assert_eq!(browser.script("return document.body.dataset.errors"), "0");

    // The page as it stands now, for the docs.
    let png = browser.screenshot();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    if let Some(path) = std::env::var_os("SHEAFALLOC_PAGE_SCREENSHOT") {
        std::fs::write(&path, &png).expect("the screenshot is written");
    }

    // A capacity the server refuses: the page shows its message, nothing
    // changes.
    let largest = "size-262144";
    let largest_before = api.cache(largest).unwrap().sheaf_capacity;
    browser.click(&format!("#cap-cache option[value=\"{largest}\"]"));
    browser.type_into("#cap-value", "3");
    browser.click("#cap-set");
    let refused = browser.wait_for(
        "the refusal shown",
        "const out = document.getElementById('cap-result');
         return out.dataset.state === 'error' ? out.textContent : null;",
        |value| !value.is_null(),
    );
    let refused = refused.as_str().unwrap();
    assert!(
        refused.contains("422") && refused.contains("1..=2"),
        "{refused}"
    );
    assert_eq!(api.cache(largest).unwrap().sheaf_capacity, largest_before);

    // Hand the changed cache back to the tuner.
    api.set_capacity(TUNED, CapacitySetting::Auto).unwrap();
    assert_eq!(api.cache(TUNED).unwrap().tuning.as_deref(), Some("auto"));
}

#[test]
fn the_page_shows_the_tuning_state_and_hands_a_cache_back_to_the_tuner() {
    let _serial = serial();
    let _workload = Workload::start();
    let handle = sidecar(None);
    let api = client(&handle);
    // Pin the busy cache at its current capacity: the page must say so.
    let capacity = api.cache(BUSY).unwrap().sheaf_capacity;
    let pinned = api
        .set_capacity(BUSY, CapacitySetting::Pinned(capacity.into()))
        .unwrap();
    assert_eq!(
        (pinned.sheaf_capacity, pinned.tuning),
        (capacity, sheafalloc::Tuning::Pinned)
    );
    let driver = Driver::start();
    let browser = Browser::open(&driver);
    browser.go(&format!("{}/", handle.url()));
    let tuning = browser.wait_for(
        "tuning states in the table",
        "const cells = Array.from(document.querySelectorAll('#rows tr[data-cache]'))
             .map(row => [row.dataset.cache, row.querySelector('td[data-field=\"tuning\"]').textContent]);
         return cells.length > 0 ? cells : null;",
        |value| !value.is_null(),
    );
    let tuning = tuning.as_array().unwrap();
    for row in tuning {
        let name = row[0].as_str().unwrap();
        let expected = api.cache(name).unwrap().tuning;
        assert_eq!(row[1].as_str(), expected.as_deref(), "{row}");
        if name == BUSY {
            assert_eq!(row[1], "pinned", "{row}");
        }
    }
    // The form offers "auto"; clicking it hands the cache back, through the
    // real API.
    browser.click(&format!("button[data-cache=\"{BUSY}\"]"));
    let hidden = browser.script("return document.getElementById('cap-auto').hidden");
    assert_eq!(
        hidden, false,
        "no auto button for a cache with a tuning state"
    );
    browser.click("#cap-auto");
    browser.wait_for(
        "the auto request answered",
        "return document.getElementById('cap-result').dataset.state;",
        |state| state == "ok",
    );
    assert_eq!(api.cache(BUSY).unwrap().tuning.as_deref(), Some("auto"));
    browser.wait_for(
        "the table shows the cache back on auto",
        &format!(
            "const cell = document.querySelector('#rows tr[data-cache=\"{BUSY}\"] td[data-field=\"tuning\"]');
             return cell ? cell.textContent : null;"
        ),
        |value| value == "auto",
    );
}
