//! `sheafctl watch`: rates per cache over each interval. On a terminal
//! each frame replaces the last (cursor home, clear to the end); when
//! stdout is a pipe or a file, frames follow one another as plain lines.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use sheafalloc_control::client::{Caches, Client};

use crate::table::{bytes, in_use, percent, share, tuning, Table};

/// Moves the cursor to the top left and clears the screen below it.
const REDRAW: &str = "\x1b[H\x1b[J";

pub fn run(
    client: &Client,
    interval: Duration,
    count: Option<u64>,
    all: bool,
) -> Result<(), String> {
    let redraw = std::io::stdout().is_terminal();
    let mut previous = client.caches().map_err(|error| error.to_string())?;
    let mut previous_at = Instant::now();
    let mut frame = 0;
    while count.is_none_or(|count| frame < count) {
        std::thread::sleep(interval);
        let current = client.caches().map_err(|error| error.to_string())?;
        let now = Instant::now();
        let seconds = now.duration_since(previous_at).as_secs_f64().max(1e-9);
        frame += 1;
        let mut text = String::new();
        if redraw {
            text.push_str(REDRAW);
            text.push_str(&format!(
                "sheafctl watch {} every {:.1} s (Ctrl-C stops)\n",
                client.base_url(),
                interval.as_secs_f64()
            ));
        }
        text.push_str(&format!("--- frame {frame} ({seconds:.2} s) ---\n"));
        text.push_str(&rates(seconds, &previous, &current, all));
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(|error| format!("cannot write the frame: {error}"))?;
        previous = current;
        previous_at = now;
    }
    Ok(())
}

/// The table of one frame: the caches active in the interval (or all),
/// busiest first.
fn rates(seconds: f64, before: &Caches, after: &Caches, all: bool) -> String {
    let mut rows: Vec<(f64, Vec<String>)> = Vec::new();
    for (old, new) in before.caches.iter().zip(&after.caches) {
        let delta = |read: fn(&sheafalloc_control::caches::CacheView) -> u64| {
            read(new).saturating_sub(read(old))
        };
        let allocations = delta(|cache| cache.allocations);
        let frees = delta(|cache| cache.frees);
        if !all && allocations == 0 && frees == 0 {
            continue;
        }
        let hits = delta(|cache| cache.barn_get_hits);
        let misses = delta(|cache| cache.barn_get_misses);
        let rate = allocations as f64 / seconds;
        rows.push((
            rate,
            vec![
                new.name.clone(),
                format!("{rate:.0}"),
                format!("{:.0}", frees as f64 / seconds),
                percent(share(delta(|cache| cache.slow_path_allocs), allocations)),
                percent(share(hits, hits + misses)),
                format!("{:.0}", delta(|cache| cache.remote_frees) as f64 / seconds),
                bytes(u64::try_from(new.live_bytes).unwrap_or(0)),
                bytes(new.bytes_held),
                new.sheaf_capacity.to_string(),
                in_use(new),
                tuning(new.tuning.as_deref()),
            ],
        ));
    }
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut table = Table::new(&[
        "CACHE", "ALLOC/S", "FREE/S", "SLOW", "BARN-HIT", "REMOTE/S", "LIVE", "HELD", "CAP",
        "IN-USE", "TUNING",
    ]);
    for (_, row) in rows {
        table.row(row);
    }
    table.render()
}
