//! `sheafctl`: a small command-line client of the sheafalloc control plane.
//!
//! ```text
//! sheafctl [--addr HOST:PORT] [--token TOKEN] <command>
//!
//!   list [--all]                  caches as a table (used ones; --all: every one)
//!   show <cache>                  every counter of one cache, e.g. size-256
//!   set-capacity <cache> <n>      change the cache's sheaf capacity, live
//!   purge                         return free memory to the OS now
//!   topology                      the allocator's nodes and the host's CPUs
//!   watch [--interval-ms N] [--count N] [--all]
//!                                 rates per cache, every interval; stops after
//!                                 N frames, or at Ctrl-C
//! ```
//!
//! The address defaults to `SHEAFALLOC_CONTROL_ADDR`, else
//! `127.0.0.1:9187`; the token to `SHEAFALLOC_CONTROL_TOKEN`. It speaks
//! plain HTTP/1.1 over `std::net::TcpStream` (one request per connection).
//! Exit status: 0 done, 1 the request failed, 2 bad usage.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use sheafalloc_control::caches::{CacheView, CachesView, CapacityChanged};
use sheafalloc_control::config::{parse_addr, ADDR_ENV, DEFAULT_PORT, TOKEN_ENV};
use sheafalloc_control::purge::Purged;
use sheafalloc_control::topology::TopologyView;

const USAGE: &str = "\
usage: sheafctl [--addr HOST:PORT] [--token TOKEN] <command>

commands:
  list [--all]                 caches as a table (used ones; --all: every one)
  show <cache>                 every counter of one cache, e.g. size-256
  set-capacity <cache> <n>     change the cache's sheaf capacity, live
  purge                        return free memory to the OS now
  topology                     the allocator's nodes and the host's CPUs
  watch [--interval-ms N] [--count N] [--all]
                               rates per cache every interval (default 1000 ms);
                               stops after N frames, or at Ctrl-C

The address defaults to SHEAFALLOC_CONTROL_ADDR, else 127.0.0.1:9187;
the token to SHEAFALLOC_CONTROL_TOKEN.";

/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(10);

/// A failure, with the exit status it maps to.
enum Failure {
    Usage(String),
    Request(String),
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => {}
        Err(Failure::Usage(message)) => {
            eprintln!("sheafctl: {message}\n\n{USAGE}");
            std::process::exit(2);
        }
        Err(Failure::Request(message)) => {
            eprintln!("sheafctl: {message}");
            std::process::exit(1);
        }
    }
}

fn run(args: &[String]) -> Result<(), Failure> {
    let mut addr = std::env::var(ADDR_ENV)
        .ok()
        .filter(|value| !value.is_empty());
    let mut token = std::env::var(TOKEN_ENV)
        .ok()
        .filter(|value| !value.is_empty());
    let mut rest = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "--addr" => addr = Some(value_of(&mut iter, "--addr")?),
            "--token" => token = Some(value_of(&mut iter, "--token")?),
            "-h" | "--help" | "help" => {
                println!("{USAGE}");
                return Ok(());
            }
            _ => rest.push(arg.clone()),
        }
    }
    let client = Client {
        addr: resolve(addr.as_deref())?,
        token,
    };
    let Some((command, options)) = rest.split_first() else {
        return Err(Failure::Usage("no command given".to_owned()));
    };
    match command.as_str() {
        "list" => {
            let all = flags(options, &["--all"])?.contains(&"--all");
            list(&client, all)
        }
        "show" => match options {
            [name] => show(&client, name),
            _ => Err(Failure::Usage("show takes one cache name".to_owned())),
        },
        "set-capacity" => match options {
            [name, capacity] => set_capacity(&client, name, capacity),
            _ => Err(Failure::Usage(
                "set-capacity takes a cache name and a capacity".to_owned(),
            )),
        },
        "purge" => {
            flags(options, &[])?;
            let purged: Purged = client.json("POST", "/v1/purge", None)?;
            println!(
                "purged: {} returned to the OS",
                bytes(purged.bytes_returned)
            );
            Ok(())
        }
        "topology" => {
            flags(options, &[])?;
            topology(&client)
        }
        "watch" => watch(&client, options),
        other => Err(Failure::Usage(format!("unknown command {other:?}"))),
    }
}

fn value_of<'a>(
    iter: &mut impl Iterator<Item = &'a String>,
    option: &str,
) -> Result<String, Failure> {
    iter.next()
        .cloned()
        .ok_or_else(|| Failure::Usage(format!("{option} needs a value")))
}

/// Checks that `options` holds only the given flags; returns those present.
fn flags<'a>(options: &'a [String], allowed: &[&str]) -> Result<Vec<&'a str>, Failure> {
    options
        .iter()
        .map(|option| {
            if allowed.contains(&option.as_str()) {
                Ok(option.as_str())
            } else {
                Err(Failure::Usage(format!("unexpected argument {option:?}")))
            }
        })
        .collect()
}

/// `HOST:PORT`, `http://HOST:PORT[/]`, or a bare port.
fn resolve(addr: Option<&str>) -> Result<SocketAddr, Failure> {
    let default = format!("127.0.0.1:{DEFAULT_PORT}");
    let text = addr.unwrap_or(&default);
    let text = text.strip_prefix("http://").unwrap_or(text);
    let text = text.trim_end_matches('/');
    parse_addr(text).map_err(|error| Failure::Usage(error.to_string()))
}

fn list(client: &Client, all: bool) -> Result<(), Failure> {
    let view: CachesView = client.json("GET", "/v1/caches", None)?;
    let caches: Vec<&CacheView> = view
        .caches
        .iter()
        .filter(|cache| all || cache.allocations > 0 || cache.slabs > 0)
        .collect();
    let mut table = vec![vec![
        "CACHE".to_owned(),
        "CAP".to_owned(),
        "IN-USE".to_owned(),
        "ALLOCS".to_owned(),
        "FREES".to_owned(),
        "LIVE".to_owned(),
        "BARN-HIT".to_owned(),
        "REMOTE".to_owned(),
        "HELD".to_owned(),
        "RETURNED".to_owned(),
    ]];
    for cache in &caches {
        table.push(vec![
            cache.name.clone(),
            cache.sheaf_capacity.to_string(),
            in_use(cache),
            cache.allocations.to_string(),
            cache.frees.to_string(),
            cache.live_objects.to_string(),
            ratio(cache.barn_get_hits, cache.barn_get_misses),
            cache.remote_frees.to_string(),
            bytes(cache.bytes_held),
            bytes(cache.bytes_returned),
        ]);
    }
    print_table(&table);
    println!(
        "{} of {} caches shown; large: {} live, {} held; threads: {} live, {} ever",
        caches.len(),
        view.caches.len(),
        view.large.live_objects,
        bytes(view.large.bytes_held),
        view.threads.live,
        view.threads.ever
    );
    Ok(())
}

fn show(client: &Client, name: &str) -> Result<(), Failure> {
    let value: serde_json::Value = client.json("GET", &format!("/v1/caches/{name}"), None)?;
    let Some(fields) = value.as_object() else {
        return Err(Failure::Request(
            "the answer is not a JSON object".to_owned(),
        ));
    };
    let width = fields.keys().map(String::len).max().unwrap_or(0);
    for (key, value) in fields {
        let value = value
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| value.to_string());
        println!("{key:<width$}  {value}");
    }
    Ok(())
}

fn set_capacity(client: &Client, name: &str, capacity: &str) -> Result<(), Failure> {
    let capacity: u64 = capacity
        .parse()
        .map_err(|_| Failure::Usage(format!("capacity {capacity:?} is not a number")))?;
    let body = format!("{{\"sheaf_capacity\": {capacity}}}");
    let changed: CapacityChanged = client.json(
        "PUT",
        &format!("/v1/caches/{name}/sheaf_capacity"),
        Some(&body),
    )?;
    println!(
        "{}: sheaf capacity {} -> {} (threads apply it at their next sheaf exchange)",
        changed.name, changed.previous_sheaf_capacity, changed.sheaf_capacity
    );
    Ok(())
}

fn topology(client: &Client) -> Result<(), Failure> {
    let view: TopologyView = client.json("GET", "/v1/topology", None)?;
    println!(
        "allocator: {} node(s){}",
        view.node_count,
        if view.nodes_are_simulated {
            " (simulated by SHEAFALLOC_NUMA_NODES)"
        } else {
            ""
        }
    );
    for node in &view.nodes {
        let cpus = node
            .cpus
            .as_ref()
            .map_or_else(|| "-".to_owned(), |cpus| cpu_list(cpus));
        println!("  node {}: cpus {cpus}", node.node);
    }
    match &view.host.error {
        Some(error) => println!("host: unknown ({error})"),
        None => {
            for node in &view.host.numa_nodes {
                let index = node
                    .os_index
                    .map_or_else(|| "?".to_owned(), |index| index.to_string());
                println!(
                    "host NUMA node {index}: cpus {}, memory {}",
                    cpu_list(&node.cpus),
                    bytes(node.memory_bytes)
                );
            }
        }
    }
    Ok(())
}

fn watch(client: &Client, options: &[String]) -> Result<(), Failure> {
    let mut interval = Duration::from_millis(1000);
    let mut count: Option<u64> = None;
    let mut all = false;
    let mut iter = options.iter();
    while let Some(option) = iter.next() {
        match option.as_str() {
            "--interval-ms" => {
                let value = value_of(&mut iter, "--interval-ms")?;
                let millis: u64 = value
                    .parse()
                    .ok()
                    .filter(|millis| *millis > 0)
                    .ok_or_else(|| Failure::Usage(format!("bad --interval-ms {value:?}")))?;
                interval = Duration::from_millis(millis);
            }
            "--count" => {
                let value = value_of(&mut iter, "--count")?;
                count = Some(
                    value
                        .parse()
                        .ok()
                        .filter(|count| *count > 0)
                        .ok_or_else(|| Failure::Usage(format!("bad --count {value:?}")))?,
                );
            }
            "--all" => all = true,
            other => return Err(Failure::Usage(format!("unexpected argument {other:?}"))),
        }
    }
    let mut previous: CachesView = client.json("GET", "/v1/caches", None)?;
    let mut previous_at = Instant::now();
    let mut frame = 0;
    while count.is_none_or(|count| frame < count) {
        std::thread::sleep(interval);
        let current: CachesView = client.json("GET", "/v1/caches", None)?;
        let now = Instant::now();
        let seconds = now.duration_since(previous_at).as_secs_f64().max(1e-9);
        frame += 1;
        print_rates(frame, seconds, &previous, &current, all);
        previous = current;
        previous_at = now;
    }
    Ok(())
}

fn print_rates(frame: u64, seconds: f64, before: &CachesView, after: &CachesView, all: bool) {
    let mut rows: Vec<(f64, Vec<String>)> = Vec::new();
    for (old, new) in before.caches.iter().zip(&after.caches) {
        let allocations = new.allocations.saturating_sub(old.allocations);
        let frees = new.frees.saturating_sub(old.frees);
        if !all && allocations == 0 && frees == 0 {
            continue;
        }
        let rate = allocations as f64 / seconds;
        rows.push((
            rate,
            vec![
                new.name.clone(),
                format!("{rate:.0}"),
                format!("{:.0}", frees as f64 / seconds),
                ratio(
                    new.barn_get_hits.saturating_sub(old.barn_get_hits),
                    new.barn_get_misses.saturating_sub(old.barn_get_misses),
                ),
                format!(
                    "{:.0}",
                    new.remote_frees.saturating_sub(old.remote_frees) as f64 / seconds
                ),
                new.live_objects.to_string(),
                in_use(new),
                bytes(new.bytes_held),
            ],
        ));
    }
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut table = vec![[
        "CACHE", "ALLOC/S", "FREE/S", "BARN-HIT", "REMOTE/S", "LIVE", "IN-USE", "HELD",
    ]
    .map(str::to_owned)
    .to_vec()];
    table.extend(rows.into_iter().map(|(_, row)| row));
    println!("--- frame {frame} ({seconds:.2} s) ---");
    print_table(&table);
    let _ = std::io::stdout().flush();
}

/// `min-max` of the capacities installed in threads, or `-`.
fn in_use(cache: &CacheView) -> String {
    match (
        cache.sheaf_capacity_in_use_min,
        cache.sheaf_capacity_in_use_max,
    ) {
        (_, 0) => "-".to_owned(),
        (min, max) if min == max => min.to_string(),
        (min, max) => format!("{min}-{max}"),
    }
}

fn ratio(hits: u64, misses: u64) -> String {
    let total = hits + misses;
    if total == 0 {
        "-".to_owned()
    } else {
        format!("{:.1}%", hits as f64 * 100.0 / total as f64)
    }
}

fn bytes(value: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut scaled = value as f64;
    let mut unit = 0;
    while scaled >= 1024.0 && unit + 1 < UNITS.len() {
        scaled /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value} B")
    } else {
        format!("{scaled:.1} {}", UNITS[unit])
    }
}

fn cpu_list(cpus: &[usize]) -> String {
    if cpus.is_empty() {
        return "none".to_owned();
    }
    // Ranges: 0-3,8,10-11.
    let mut parts = Vec::new();
    let mut start = cpus[0];
    let mut end = start;
    for &cpu in &cpus[1..] {
        if cpu == end + 1 {
            end = cpu;
        } else {
            parts.push(range(start, end));
            start = cpu;
            end = cpu;
        }
    }
    parts.push(range(start, end));
    parts.join(",")
}

fn range(start: usize, end: usize) -> String {
    if start == end {
        start.to_string()
    } else {
        format!("{start}-{end}")
    }
}

fn print_table(rows: &[Vec<String>]) {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|column| rows.iter().map(|row| row[column].len()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(column, (cell, width))| {
                if column == 0 {
                    format!("{cell:<width$}")
                } else {
                    format!("{cell:>width$}")
                }
            })
            .collect();
        println!("{}", line.join("  "));
    }
}

/// The control plane at one address.
struct Client {
    addr: SocketAddr,
    token: Option<String>,
}

impl Client {
    /// Sends a request and parses a 2xx JSON answer; any other answer
    /// becomes a failure carrying the server's `error` message.
    fn json<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> Result<T, Failure> {
        let (status, text) = self.request(method, path, body).map_err(|error| {
            Failure::Request(format!("{method} http://{}{path}: {error}", self.addr))
        })?;
        if !(200..300).contains(&status) {
            let message = serde_json::from_str::<sheafalloc_control::ErrorBody>(&text)
                .map(|body| body.error)
                .unwrap_or(text);
            return Err(Failure::Request(format!(
                "{method} {path}: {status}: {message}"
            )));
        }
        serde_json::from_str(&text).map_err(|error| {
            Failure::Request(format!("{method} {path}: unexpected answer: {error}"))
        })
    }

    /// One HTTP/1.1 exchange on a fresh connection.
    fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> std::io::Result<(u16, String)> {
        let mut stream = TcpStream::connect_timeout(&self.addr, TIMEOUT)?;
        stream.set_read_timeout(Some(TIMEOUT))?;
        stream.set_write_timeout(Some(TIMEOUT))?;
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: application/json\r\n",
            self.addr
        );
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        let body = body.unwrap_or("");
        if method != "GET" {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes())?;
        stream.write_all(body.as_bytes())?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response)?;
        parse_response(&response)
    }
}

/// Status and body of a complete HTTP/1.1 response (read to EOF).
fn parse_response(response: &[u8]) -> std::io::Result<(u16, String)> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let split = response
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of headers"))?;
    let head = std::str::from_utf8(&response[..split]).map_err(|_| bad("headers not UTF-8"))?;
    let raw_body = &response[split + 4..];
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|status| status.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let mut chunked = false;
    let mut length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("transfer-encoding") && value.eq_ignore_ascii_case("chunked") {
            chunked = true;
        } else if name.eq_ignore_ascii_case("content-length") {
            length = value.parse::<usize>().ok();
        }
    }
    let body = if chunked {
        dechunk(raw_body).ok_or_else(|| bad("bad chunked body"))?
    } else {
        match length {
            Some(length) => raw_body
                .get(..length)
                .ok_or_else(|| bad("truncated body"))?
                .to_vec(),
            None => raw_body.to_vec(),
        }
    };
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = data.windows(2).position(|window| window == b"\r\n")?;
        let size_text = std::str::from_utf8(&data[..line_end]).ok()?;
        let size_text = size_text.split(';').next()?.trim();
        let size = usize::from_str_radix(size_text, 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}
