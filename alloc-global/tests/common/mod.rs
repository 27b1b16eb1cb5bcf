//! Helpers shared by the integration tests: content patterns, seeds,
//! pinning, rounds of objects taken and given back.
#![allow(dead_code)]

pub mod child;

/// The byte every position of an object holds: derived from the object's
/// address, its size and a generation, so a misplaced, overlapping or stale
/// object shows up as a mismatch.
pub fn pattern_byte(addr: usize, size: usize, generation: u64, index: usize) -> u8 {
    let seed = (addr as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (size as u64).rotate_left(17)
        ^ generation;
    (seed
        .wrapping_add(index as u64 * 0x5851_F42D)
        .rotate_right((index % 61) as u32)
        & 0xFF) as u8
}

/// Fills `[ptr, ptr + size)` with the pattern. Writes every byte of small
/// objects; for objects above 4 KiB, the first and last 256 bytes and one
/// byte in every 512.
///
/// # Safety
/// `ptr` is valid for writes of `size` bytes.
pub unsafe fn fill(ptr: *mut u8, size: usize, generation: u64) {
    for index in positions(size) {
        // SAFETY: index < size, and the caller guarantees `size` bytes.
        unsafe { *ptr.add(index) = pattern_byte(ptr as usize, size, generation, index) };
    }
}

/// Checks the pattern written by [`fill`]; returns the first bad index.
///
/// # Safety
/// `ptr` is valid for reads of `size` bytes.
pub unsafe fn check(ptr: *const u8, size: usize, generation: u64) -> Result<(), usize> {
    for index in positions(size) {
        // SAFETY: index < size.
        let byte = unsafe { *ptr.add(index) };
        if byte != pattern_byte(ptr as usize, size, generation, index) {
            return Err(index);
        }
    }
    Ok(())
}

/// The positions [`fill`] writes for an object of `size` bytes.
pub fn positions(size: usize) -> impl Iterator<Item = usize> {
    let dense = size <= 4096;
    (0..size).filter(move |&i| dense || i < 256 || i + 256 >= size || i % 512 == 0)
}

/// Seconds to run a soak test for: `SHEAFALLOC_STRESS_SECS`, else `default`.
pub fn stress_secs(default: u64) -> u64 {
    std::env::var("SHEAFALLOC_STRESS_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The seed of a randomised test: `SHEAFALLOC_SEED`, else `default`. Printed
/// so a failure can be replayed.
pub fn seed(default: u64) -> u64 {
    let seed = std::env::var("SHEAFALLOC_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    eprintln!("seed = {seed} (replay with SHEAFALLOC_SEED={seed})");
    seed
}

/// A small, fast, deterministic generator (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Flushes the calling thread's sheaves, then asserts that cache `name` on
/// `node` is quiescent: with nothing live and no thread holding its
/// sheaves, every object out of the slabs is in the node's barn.
pub fn assert_quiescent(name: &str, node: usize) -> sheafalloc::NodeAudit {
    sheafalloc::flush_thread_cache();
    let audit = sheafalloc::audit(name, node).expect("known cache and node");
    assert_eq!(
        audit.objects_out_of_slabs, audit.barn_objects,
        "{name} on node {node}: {audit:?}"
    );
    audit
}

/// Pins the calling thread to `cpu` (panics if the OS refuses).
pub fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and
    // sched_setaffinity only touch it and the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0,
            "pin to CPU {cpu}"
        );
    }
}

/// The cache mode the environment asks for: per-thread where rseq is off
/// (`GLIBC_TUNABLES=glibc.pthread.rseq=0`, as CI's second run of the
/// tests) or per-CPU sheaves are turned off (`SHEAFALLOC_PERCPU=off`),
/// else per-CPU (this machine's kernel and glibc have rseq).
pub fn expected_mode() -> sheafalloc::CacheMode {
    let off = std::env::var("SHEAFALLOC_PERCPU").is_ok_and(|v| v == "off");
    let no_rseq = std::env::var("GLIBC_TUNABLES").is_ok_and(|v| v.contains("glibc.pthread.rseq=0"));
    if off || no_rseq {
        sheafalloc::CacheMode::PerThread
    } else {
        sheafalloc::CacheMode::PerCpu
    }
}

/// One round of taking `count` objects of `layout` from `allocator` and
/// giving them back: object `i` gets `tag ^ i` in its first `bytes` bytes,
/// checked before it is freed, in allocation order. With `count` a few
/// sheaves' worth, every round swaps and trades sheaves both ways.
pub fn take_and_give_back<A: std::alloc::GlobalAlloc>(
    allocator: &A,
    layout: std::alloc::Layout,
    count: usize,
    bytes: usize,
    tag: u8,
) {
    assert!(bytes <= layout.size());
    let objects: Vec<*mut u8> = (0..count)
        .map(|i| {
            // SAFETY: a valid, non-zero layout (the callers' constants).
            let object = unsafe { allocator.alloc(layout) };
            assert!(!object.is_null());
            // SAFETY: `layout.size() >= bytes` bytes were just allocated.
            unsafe { object.write_bytes(tag ^ i as u8, bytes) };
            object
        })
        .collect();
    for (i, object) in objects.into_iter().enumerate() {
        // SAFETY: written above, `bytes` bytes.
        let written = unsafe { std::slice::from_raw_parts(object, bytes) };
        assert!(written.iter().all(|&b| b == tag ^ i as u8));
        // SAFETY: allocated above with `layout`, freed once.
        unsafe { allocator.dealloc(object, layout) };
    }
}

/// On `cpu` (the calling thread pinned there): allocates `count` objects
/// of `size` bytes with the global allocator and fills each with its
/// index as the generation ([`fill`]).
pub fn allocate_on(cpu: usize, size: usize, count: u64) -> Vec<usize> {
    pin_to_cpu(cpu);
    let layout = std::alloc::Layout::from_size_align(size, 8).expect("a valid layout");
    (0..count)
        .map(|generation| {
            // SAFETY: a non-zero-size layout.
            let object = unsafe { std::alloc::alloc(layout) };
            assert!(!object.is_null());
            // SAFETY: the object has `size` bytes.
            unsafe { fill(object, size, generation) };
            object as usize
        })
        .collect()
}

/// On `cpu` (the calling thread pinned there): checks each object of
/// `size` bytes from [`allocate_on`] against its index and frees it.
pub fn free_on(cpu: usize, size: usize, objects: &[usize]) {
    pin_to_cpu(cpu);
    let layout = std::alloc::Layout::from_size_align(size, 8).expect("a valid layout");
    for (generation, &object) in objects.iter().enumerate() {
        let object = object as *mut u8;
        // SAFETY: filled by `allocate_on` with this generation.
        let checked = unsafe { check(object, size, generation as u64) };
        assert_eq!(checked, Ok(()), "object {object:p} corrupted");
        // SAFETY: allocated with this layout, no longer used.
        unsafe { std::alloc::dealloc(object, layout) };
    }
}

/// The set-up of a test that moves objects between CPUs 0 and 1 through
/// a cache of its own: false (the test has nothing to check) on a
/// single CPU; otherwise checks the cache mode CI expects, turns the
/// auto-tuner off (it would change the capacity under the test) and sets
/// `cache` to `capacity`.
pub fn two_cpus_and_capacity(cache: &str, capacity: u64) -> bool {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("one CPU: every object is of its lane");
        return false;
    }
    assert_eq!(sheafalloc::cache_mode(), expected_mode());
    sheafalloc::set_autotune(false);
    sheafalloc::set_sheaf_capacity(cache, capacity).expect("a valid capacity");
    true
}
