//! What the workloads may ask of the binary's global allocator beyond
//! `GlobalAlloc`: its name, the node a thread allocates on, its own call to
//! give free memory back to the OS, and (sheafalloc) its counters.
//!
//! Only the allocator the binary really uses is ever called: a `wl-jemalloc`
//! process never touches sheafalloc's engine, and so on.

use std::sync::Mutex;

use crate::peers::Peer;
use crate::record::Record;

/// The binary's global allocator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Global(pub Peer);

/// The counters `add_counters` reports, summed over sheafalloc's caches
/// (the key of each after `sheaf_` or `sheaf_window_`).
pub const COUNTER_KEYS: [&str; 11] = [
    "allocations",
    "slow_paths",
    "spare_swaps",
    "refills",
    "flushes",
    "barn_get_hits",
    "barn_get_misses",
    "barn_put_hits",
    "barn_put_misses",
    "remote_frees",
    "capacity_adjustments",
];

/// sheafalloc's counters at one instant, in the order of [`COUNTER_KEYS`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct CounterSums([u64; COUNTER_KEYS.len()]);

impl CounterSums {
    fn now() -> Self {
        let mut sums = Self::default();
        for cache in sheafalloc::cache_stats() {
            let values = [
                cache.allocations,
                cache.slow_path_allocs + cache.slow_path_frees,
                cache.spare_swaps,
                cache.slab_refills,
                cache.slab_flushes,
                cache.barn_get_hits,
                cache.barn_get_misses,
                cache.barn_put_hits,
                cache.barn_put_misses,
                cache.remote_frees,
                cache.capacity_adjustments,
            ];
            for (total, value) in sums.0.iter_mut().zip(values) {
                *total += value;
            }
        }
        sums
    }
}

/// Where the measured window of this process's run is, for its counters.
#[derive(Clone, Copy, Debug, Default)]
enum Window {
    #[default]
    NotOpened,
    Open(CounterSums),
    Closed(CounterSums, CounterSums),
}

/// The process's window (one run per process).
static WINDOW: Mutex<Window> = Mutex::new(Window::NotOpened);

/// The allocator this process runs under, once `set_active` said.
static ACTIVE: Mutex<Option<Peer>> = Mutex::new(None);

/// Says which allocator is the process's global one (called once by
/// `service::main`), so the window's edges know whether to read
/// sheafalloc's counters.
pub fn set_active(peer: Peer) {
    *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()) = Some(peer);
}

/// The measured window opens (first call) or closes (second call): the
/// threads' moves between CPUs are read (`migrations_*`), and under
/// sheafalloc its counters, so the result line can give what the window
/// alone did (`sheaf_window_*`).
pub fn window_edge() {
    super::migrations::edge();
    if *ACTIVE.lock().unwrap_or_else(|e| e.into_inner()) != Some(Peer::Sheaf) {
        return;
    }
    let sums = CounterSums::now();
    let mut window = WINDOW.lock().unwrap_or_else(|e| e.into_inner());
    *window = match *window {
        Window::NotOpened => Window::Open(sums),
        Window::Open(start) => Window::Closed(start, sums),
        closed @ Window::Closed(..) => closed,
    };
}

impl Global {
    /// The allocator's name.
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// The capacities the engine pinned at start from `SHEAFALLOC_CAPACITY`
    /// (sheafalloc only), for the result line.
    pub fn capacity_env(self) -> Option<String> {
        if self.0 != Peer::Sheaf {
            return None;
        }
        std::env::var("SHEAFALLOC_CAPACITY")
            .ok()
            .filter(|list| !list.is_empty())
    }

    /// The allocator node of the calling thread (sheafalloc only).
    pub fn thread_node(self) -> Option<usize> {
        (self.0 == Peer::Sheaf).then(sheafalloc::thread_node)
    }

    /// What `release` calls.
    pub fn release_call(self) -> &'static str {
        match self.0 {
            Peer::Sheaf => "sheafalloc::purge()",
            Peer::System => "malloc_trim(0)",
            Peer::Mimalloc => "mi_collect(true)",
            Peer::Jemalloc => "mallctl(arena.<all>.purge)",
            Peer::Snmalloc => "none",
        }
    }

    /// Asks the allocator to give its free memory back to the OS now, with
    /// its own call (snmalloc has none in its Rust API).
    pub fn release(self) {
        match self.0 {
            Peer::Sheaf => {
                sheafalloc::purge();
            }
            Peer::System => {
                // SAFETY: malloc_trim has no preconditions.
                unsafe { libc::malloc_trim(0) };
            }
            Peer::Mimalloc => peer_calls::mimalloc_collect(),
            Peer::Jemalloc => peer_calls::jemalloc_purge(),
            Peer::Snmalloc => {}
        }
    }

    /// jemalloc's `config.debug` (built with assertions), read at run time;
    /// `None` for the other allocators.
    pub fn jemalloc_debug(self) -> Option<bool> {
        if self.0 != Peer::Jemalloc {
            return None;
        }
        peer_calls::jemalloc_debug()
    }

    /// Adds sheafalloc's counters, summed over its caches, to `record`
    /// (`sheaf_*` keys: the whole run, warm-up included; `sheaf_window_*`:
    /// the measured window alone, where the workload has one), or
    /// jemalloc's `config.debug`.
    pub fn add_counters(self, record: &mut Record) {
        if let Some(debug) = self.jemalloc_debug() {
            record.set("jemalloc_config_debug", debug);
        }
        if self.0 != Peer::Sheaf {
            return;
        }
        let sums = CounterSums::now();
        for (key, value) in COUNTER_KEYS.into_iter().zip(sums.0) {
            record.set(&format!("sheaf_{key}"), value);
        }
        let window = *WINDOW.lock().unwrap_or_else(|e| e.into_inner());
        if let Window::Closed(start, end) = window {
            for ((key, start), end) in COUNTER_KEYS.into_iter().zip(start.0).zip(end.0) {
                record.set(&format!("sheaf_window_{key}"), end.wrapping_sub(start));
            }
        }
        let topology = sheafalloc::topology();
        record.set("sheaf_topology", topology.source);
        record.set("sheaf_cache_mode", sheafalloc::cache_mode().as_str());
        record.set("sheaf_nodes", topology.nodes.len());
        // What the auto-tuner did: how often, and where the busiest cache's
        // capacity ended up.
        let caches = sheafalloc::caches();
        record.set("sheaf_tuner_on", sheafalloc::autotune_enabled());
        record.set("sheaf_tuner_ticks", sheafalloc::tuner_ticks());
        record.set("sheaf_cpus_keeping_lanes", sheafalloc::cpus_keeping_lanes());
        record.set("sheaf_lane_switches", sheafalloc::lane_steering_switches());
        if let Some(busiest) = caches.iter().max_by_key(|c| c.allocations) {
            record.set("sheaf_busiest_cache", &busiest.name);
            record.set("sheaf_busiest_capacity", busiest.sheaf_capacity);
        }
        let changed: Vec<String> = caches
            .iter()
            .filter(|c| c.capacity_adjustments > 0)
            .map(|c| format!("{}:{}", c.name, c.sheaf_capacity))
            .collect();
        if !changed.is_empty() {
            record.set("sheaf_tuned", changed.join("/"));
        }
        add_memory(record, &caches);
        add_top_cached(record, &caches);
    }
}

/// One cache's memory at the end of the run, in bytes: held from the OS
/// for slabs, in live objects (signed, as the snapshot gives it), free in
/// slabs and in barns: the parts both [`add_memory`] and
/// [`add_top_cached`] report.
struct CacheMemory {
    held: u64,
    live: i64,
    slab_free: u64,
    barn: u64,
}

impl CacheMemory {
    fn of(cache: &sheafalloc::CacheSnapshot) -> Self {
        Self {
            held: cache.all_nodes.bytes_held,
            live: cache.live_bytes,
            slab_free: cache.all_nodes.slab_free_objects * cache.object_size,
            barn: cache.all_nodes.barn_objects * cache.object_size,
        }
    }
}

/// The caches that hold the most beyond their live objects and free slab
/// slots at the end of the run (objects in sheaves, barns and remote
/// batches, and their slabs' unused tails), as `name:KiB`, heaviest
/// first: which capacities an RSS figure beyond the peers' comes from.
fn add_top_cached(record: &mut Record, caches: &[sheafalloc::CacheSnapshot]) {
    const SHOWN: usize = 4;
    let mut cached: Vec<(u64, &str)> = caches
        .iter()
        .map(|cache| {
            let memory = CacheMemory::of(cache);
            let live = u64::try_from(memory.live).unwrap_or(0);
            let cached = memory.held.saturating_sub(live + memory.slab_free);
            (cached / 1024, cache.name.as_str())
        })
        .filter(|&(kib, _)| kib > 0)
        .collect();
    cached.sort_unstable_by(|a, b| b.cmp(a));
    let shown: Vec<String> = cached
        .iter()
        .take(SHOWN)
        .map(|(kib, name)| format!("{name}:{kib}"))
        .collect();
    if !shown.is_empty() {
        record.set("sheaf_top_cached_kib", shown.join("/"));
    }
}

/// Where the memory sheafalloc holds for its caches sits at the end of the
/// run, summed over the caches, in KiB: held from the OS for slabs
/// (`sheaf_held_kib`), in live objects, free in slabs, in barns, and the
/// rest, free objects in sheaves (CPUs' and threads') and remote batches.
/// What an RSS figure beyond the peers' is made of.
fn add_memory(record: &mut Record, caches: &[sheafalloc::CacheSnapshot]) {
    let (mut held, mut live, mut slab_free, mut barn) = (0u64, 0i64, 0u64, 0u64);
    for memory in caches.iter().map(CacheMemory::of) {
        held += memory.held;
        live += memory.live;
        slab_free += memory.slab_free;
        barn += memory.barn;
    }
    let live = u64::try_from(live).unwrap_or(0);
    let sheaves = held.saturating_sub(live + slab_free + barn);
    for (key, bytes) in [
        ("held", held),
        ("live", live),
        ("slab_free", slab_free),
        ("barn", barn),
        ("sheaves", sheaves),
    ] {
        record.set(&format!("sheaf_{key}_kib"), bytes / 1024);
    }
}

/// The peers' own calls (without the `peers` feature their binaries are
/// not built, so these are never reached and do nothing).
#[cfg(feature = "peers")]
mod peer_calls {
    /// `MALLCTL_ARENAS_ALL`: jemalloc's "every arena" index.
    const JEMALLOC_ARENAS_ALL: u32 = 4096;

    pub fn mimalloc_collect() {
        // SAFETY: mi_collect has no preconditions.
        unsafe { libmimalloc_sys::mi_collect(true) };
    }

    pub fn jemalloc_purge() {
        let name = format!("arena.{JEMALLOC_ARENAS_ALL}.purge\0");
        // SAFETY: a NUL-terminated control name; `purge` takes no old or
        // new value, so all four pointers are null.
        unsafe {
            tikv_jemalloc_sys::mallctl(
                name.as_ptr().cast(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )
        };
    }

    pub fn jemalloc_debug() -> Option<bool> {
        let mut debug = false;
        let mut len = std::mem::size_of::<bool>();
        // SAFETY: a NUL-terminated control name; `config.debug` is a bool,
        // read into `debug` whose size is passed in `len`; no new value.
        let rc = unsafe {
            tikv_jemalloc_sys::mallctl(
                c"config.debug".as_ptr(),
                (&raw mut debug).cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        (rc == 0).then_some(debug)
    }
}

#[cfg(not(feature = "peers"))]
mod peer_calls {
    pub fn mimalloc_collect() {}

    pub fn jemalloc_purge() {}

    pub fn jemalloc_debug() -> Option<bool> {
        None
    }
}
