//! `sheafctl`: the command-line client of the sheafalloc control plane.
//!
//! Arguments are parsed by clap (`sheafctl --help`, `sheafctl <command>
//! --help`, `sheafctl completions bash`); requests go through the crate's
//! one HTTP client (`sheafalloc_control::client`). The address defaults to
//! `SHEAFALLOC_CONTROL_ADDR`, else `127.0.0.1:9187`; the token to
//! `SHEAFALLOC_CONTROL_TOKEN` or the file named by
//! `SHEAFALLOC_CONTROL_TOKEN_FILE`. Exit status: 0 done, 1 the request
//! failed (the server's message is printed), 2 bad usage.

mod table;
mod watch;

use std::num::NonZeroU64;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};
use sheafalloc_control::client::{CapacitySetting, Client};
use sheafalloc_control::config::{ADDR_ENV, DEFAULT_PORT, TOKEN_ENV, TOKEN_FILE_ENV};
use table::{bytes, cpu_list, in_use, percent, share, tuning, Table};

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "sheafctl",
    version,
    about = "Reads and tunes the sheafalloc allocator of a running process through its control plane.",
    after_help = "The process must run with SHEAFALLOC_CONTROL_ADDR set (sheafalloc's `control` feature).\n\
                  Exit status: 0 done, 1 the request failed, 2 bad usage."
)]
struct Cli {
    /// The control plane: HOST:PORT, http://HOST:PORT, or a port on 127.0.0.1
    /// [default: 127.0.0.1:9187].
    #[arg(long, global = true, env = ADDR_ENV)]
    addr: Option<String>,
    /// Bearer token (writes need it; reads too if the sidecar protects them).
    #[arg(long, global = true, env = TOKEN_ENV, hide_env_values = true)]
    token: Option<String>,
    /// File holding the token, readable by its owner only.
    #[arg(long, global = true, env = TOKEN_FILE_ENV, conflicts_with = "token")]
    token_file: Option<PathBuf>,
    /// How long one request may take, in seconds.
    #[arg(long, global = true, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    timeout_secs: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Caches as a table: capacity, tuning, counters, slow-path share since start.
    List {
        /// Every cache, not only those in use.
        #[arg(long)]
        all: bool,
    },
    /// Every figure of one cache.
    Show {
        /// The cache, e.g. size-256.
        cache: String,
    },
    /// Changes a cache's sheaf capacity, live (threads apply it at their next sheaf exchange).
    SetCapacity {
        /// The cache, e.g. size-256.
        cache: String,
        /// Objects per sheaf, or `auto` to hand it back to the auto-tuner.
        capacity: CapacitySetting,
    },
    /// Returns free memory to the OS now.
    Purge,
    /// The allocator's NUMA nodes and the host's CPUs.
    Topology,
    /// Rates per cache over each interval: allocations, slow-path share, barn hits.
    ///
    /// On a terminal the table is redrawn in place; otherwise each frame is
    /// printed after the last one.
    Watch {
        /// Time between frames, in milliseconds.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
        interval_ms: u64,
        /// Stop after this many frames (default: until interrupted).
        #[arg(long)]
        count: Option<NonZeroU64>,
        /// Every cache, not only those active in the interval.
        #[arg(long)]
        all: bool,
    },
    /// Prints a shell completion script, e.g. `sheafctl completions bash > /etc/bash_completion.d/sheafctl`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("sheafctl: {message}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    if let Command::Completions { shell } = cli.command {
        clap_complete::generate(
            shell,
            &mut Cli::command(),
            "sheafctl",
            &mut std::io::stdout(),
        );
        return Ok(());
    }
    // An empty variable counts as unset, as it does for the sidecar.
    let token_file = cli.token_file.filter(|path| !path.as_os_str().is_empty());
    let token = match &token_file {
        Some(path) => Some(
            sheafalloc_control::token::read_token_file(path).map_err(|error| error.to_string())?,
        ),
        None => cli.token.clone(),
    };
    let addr = cli
        .addr
        .filter(|addr| !addr.trim().is_empty())
        .unwrap_or_else(|| format!("127.0.0.1:{DEFAULT_PORT}"));
    let client = Client::new(&addr)
        .map_err(|error| error.to_string())?
        .with_token(token)
        .with_timeout(Duration::from_secs(cli.timeout_secs));
    let failed = |error: sheafalloc_control::client::ClientError| error.to_string();
    match cli.command {
        Command::List { all } => list(&client, all),
        Command::Show { cache } => show(&client, &cache),
        Command::SetCapacity { cache, capacity } => {
            let changed = client.set_capacity(&cache, capacity).map_err(failed)?;
            println!(
                "{}: sheaf capacity {} -> {} (threads apply it at their next sheaf exchange)",
                changed.name, changed.previous_sheaf_capacity, changed.sheaf_capacity
            );
            Ok(())
        }
        Command::Purge => {
            let purged = client.purge().map_err(failed)?;
            println!(
                "purged: {} returned to the OS",
                bytes(purged.bytes_returned)
            );
            Ok(())
        }
        Command::Topology => topology(&client),
        Command::Watch {
            interval_ms,
            count,
            all,
        } => watch::run(
            &client,
            Duration::from_millis(interval_ms),
            count.map(NonZeroU64::get),
            all,
        ),
        Command::Completions { .. } => Ok(()),
    }
}

fn list(client: &Client, all: bool) -> Result<(), String> {
    let view = client.caches().map_err(|error| error.to_string())?;
    let mut table = Table::new(&[
        "CACHE", "CAP", "MAX", "IN-USE", "TUNING", "ALLOCS", "SLOW", "BARN-HIT", "LIVE", "HELD",
        "RETURNED",
    ]);
    let shown: Vec<_> = view
        .caches
        .iter()
        .filter(|cache| all || cache.allocations > 0 || cache.slabs > 0)
        .collect();
    for cache in &shown {
        table.row(vec![
            cache.name.clone(),
            cache.sheaf_capacity.to_string(),
            cache.sheaf_capacity_max.to_string(),
            in_use(cache),
            tuning(cache.tuning.as_deref()),
            cache.allocations.to_string(),
            percent(share(cache.slow_path_allocs, cache.allocations)),
            percent(share(
                cache.barn_get_hits,
                cache.barn_get_hits + cache.barn_get_misses,
            )),
            bytes(u64::try_from(cache.live_bytes).unwrap_or(0)),
            bytes(cache.bytes_held),
            bytes(cache.bytes_returned),
        ]);
    }
    print!("{}", table.render());
    println!(
        "{} of {} caches shown (SLOW and BARN-HIT since start); large: {} live, {} held; threads: {} live, {} ever",
        shown.len(),
        view.caches.len(),
        view.large.live_objects,
        bytes(view.large.bytes_held),
        view.threads.live,
        view.threads.ever
    );
    Ok(())
}

fn show(client: &Client, name: &str) -> Result<(), String> {
    let cache = client.cache(name).map_err(|error| error.to_string())?;
    let mut fields: Vec<(String, String)> = match serde_json::to_value(&cache.view) {
        Ok(serde_json::Value::Object(map)) => map
            .into_iter()
            .map(|(key, value)| {
                let value = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned);
                (key, value)
            })
            .collect(),
        _ => return Err("the cache did not serialise as an object".to_owned()),
    };
    fields.push(("tuning".to_owned(), tuning(cache.tuning.as_deref())));
    fields.push((
        "slow_path_share".to_owned(),
        percent(share(cache.slow_path_allocs, cache.allocations)),
    ));
    let width = fields.iter().map(|(key, _)| key.len()).max().unwrap_or(0);
    for (key, value) in fields {
        println!("{key:<width$}  {value}");
    }
    Ok(())
}

fn topology(client: &Client) -> Result<(), String> {
    let view = client.topology().map_err(|error| error.to_string())?;
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
