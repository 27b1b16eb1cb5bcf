//! Linux implementation of the OS contract (see `os/mod.rs`).

use core::ffi::{c_void, CStr};
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use super::fault::{should_fail, FaultPoint};

static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);

/// The kernel's page size, read once.
pub fn page_size() -> usize {
    let cached = PAGE_SIZE.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    // SAFETY: sysconf has no preconditions and does not allocate.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let size = if size > 0 { size as usize } else { 4096 };
    PAGE_SIZE.store(size, Ordering::Relaxed);
    size
}

/// Reserves `bytes` of address space aligned to `align` (a power of two),
/// inaccessible and not charged to the commit limit until [`commit`].
pub fn reserve(bytes: usize, align: usize) -> Option<NonNull<u8>> {
    let padded = bytes.checked_add(align)?;
    // SAFETY: an anonymous PROT_NONE mapping at a kernel-chosen address has no
    // preconditions; failure is reported as MAP_FAILED and handled below.
    let raw = unsafe {
        libc::mmap(
            ptr::null_mut(),
            padded,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: duty 1: `raw` is the mapping of `padded = bytes + align` bytes
    // made just above, which no one else references yet.
    unsafe { trim_to_alignment(raw, bytes, align) }
}

/// Unmaps the head and tail of a mapping of `bytes + align` bytes at `raw`
/// around its first `align`-aligned block of `bytes`, and returns that
/// block. `align` is a power of two and, like `bytes`, a page multiple.
///
/// # Safety
///
/// 1. `[raw, raw + bytes + align)` is a mapping of the caller's that no
///    one else references.
unsafe fn trim_to_alignment(raw: *mut c_void, bytes: usize, align: usize) -> Option<NonNull<u8>> {
    let start = raw as usize;
    // None of this wraps: `align` is a power of two, so `mask` is
    // `align - 1`; the mapping `[start, start + bytes + align)` exists, so
    // `start + mask` and `aligned + bytes` (with `aligned - start <= mask`)
    // are addresses inside it; `head <= mask < align`, so `tail = align -
    // head` is positive.
    let mask = align.wrapping_sub(1);
    let aligned = start.wrapping_add(mask) & !mask;
    let head = aligned.wrapping_sub(start);
    let tail = align.wrapping_sub(head);
    // SAFETY: both trims lie inside the mapping (duty 1), are page-aligned
    // (align and bytes are page multiples) and no one else references them
    // (duty 1).
    unsafe {
        if head != 0 {
            libc::munmap(raw, head);
        }
        if tail != 0 {
            libc::munmap(aligned.wrapping_add(bytes) as *mut c_void, tail);
        }
    }
    NonNull::new(aligned as *mut u8)
}

/// Makes `[ptr, ptr + bytes)` of a reservation readable and writable.
/// Fresh pages read as zero.
pub fn commit(ptr: NonNull<u8>, bytes: usize) -> bool {
    if should_fail(FaultPoint::Commit) {
        return false;
    }
    // SAFETY: the contract of this module: the range lies in a reservation
    // made by `reserve` and is page-aligned.
    unsafe {
        libc::mprotect(
            ptr.as_ptr().cast(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
        ) == 0
    }
}

/// Gives the physical pages of `[ptr, ptr + bytes)` back to the OS. The range
/// stays mapped and reads as zero when touched again.
pub fn return_to_os(ptr: NonNull<u8>, bytes: usize) -> bool {
    if should_fail(FaultPoint::Return) {
        return false;
    }
    // SAFETY: the range is committed memory of this allocator that holds no
    // live object (the caller's duty, see the module contract).
    unsafe { libc::madvise(ptr.as_ptr().cast(), bytes, libc::MADV_DONTNEED) == 0 }
}

/// Maps `bytes` of fresh zeroed memory aligned to `align` (a power of two,
/// at least the page size).
pub fn map(bytes: usize, align: usize) -> Option<NonNull<u8>> {
    if should_fail(FaultPoint::Map) {
        return None;
    }
    let page = page_size();
    let padded = if align > page {
        bytes.checked_add(align)?
    } else {
        bytes
    };
    // SAFETY: an anonymous private mapping at a kernel-chosen address.
    let raw = unsafe {
        libc::mmap(
            ptr::null_mut(),
            padded,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return None;
    }
    if align <= page {
        return NonNull::new(raw.cast());
    }
    // SAFETY: duty 1: `raw` is the mapping of `padded = bytes + align` bytes
    // made just above, which no one else references yet.
    unsafe { trim_to_alignment(raw, bytes, align) }
}

/// Unmaps a block made by [`map`].
///
/// # Safety
///
/// 1. `[ptr, ptr + bytes)` is exactly a block returned by [`map`] (or a
///    page-aligned part of one) that nothing will touch again.
pub unsafe fn unmap(ptr: NonNull<u8>, bytes: usize) {
    // SAFETY: duty 1 of the caller.
    unsafe {
        libc::munmap(ptr.as_ptr().cast(), bytes);
    }
}

/// Grows or shrinks a block made by [`map`] (page-aligned only), moving it
/// if needed without copying through user space.
///
/// # Safety
///
/// 1. `[ptr, ptr + old_bytes)` is a live block returned by [`map`] with an
///    alignment of at most one page.
/// 2. On success the old range must no longer be used.
pub unsafe fn remap(ptr: NonNull<u8>, old_bytes: usize, new_bytes: usize) -> Option<NonNull<u8>> {
    if should_fail(FaultPoint::Map) {
        return None;
    }
    // SAFETY: duty 1 of the caller; MREMAP_MAYMOVE lets the kernel move it.
    let raw = unsafe {
        libc::mremap(
            ptr.as_ptr().cast(),
            old_bytes,
            new_bytes,
            libc::MREMAP_MAYMOVE,
        )
    };
    if raw == libc::MAP_FAILED {
        None
    } else {
        NonNull::new(raw.cast())
    }
}

/// Sleeps while `*word == expected` (or until a spurious wake-up).
pub fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: FUTEX_WAIT reads the aligned u32 behind a live reference.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            ptr::null::<libc::timespec>(),
        );
    }
}

/// Wakes at most `count` threads waiting on `word`.
pub fn futex_wake(word: &AtomicU32, count: u32) {
    // SAFETY: FUTEX_WAKE only uses the address as a key.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            count,
        );
    }
}

/// Writes `bytes` to stderr without allocating; errors are ignored.
pub fn write_stderr(bytes: &[u8]) {
    let mut rest = bytes;
    while !rest.is_empty() {
        // SAFETY: the buffer is valid for `rest.len()` bytes.
        let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
        if n <= 0 {
            return;
        }
        rest = rest.get(n as usize..).unwrap_or(&[]);
    }
}

/// Ends the process at once (used only by `invariant!` and misuse checks).
pub fn abort() -> ! {
    // SAFETY: abort has no preconditions.
    unsafe { libc::abort() }
}

/// The value of environment variable `name`, read without allocating.
pub fn env(name: &CStr) -> Option<&'static [u8]> {
    // SAFETY: getenv reads the environment; the returned pointer stays valid
    // unless the program calls setenv for the same name, which sheafalloc's
    // variables are not meant to be changed by at run time.
    let value = unsafe { libc::getenv(name.as_ptr()) };
    if value.is_null() {
        return None;
    }
    // SAFETY: getenv returns a NUL-terminated string.
    Some(unsafe { CStr::from_ptr(value) }.to_bytes())
}

/// Milliseconds of a coarse monotonic clock (vDSO, no system call).
pub fn monotonic_ms() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid out-pointer.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut now);
    }
    (now.tv_sec as u64)
        .saturating_mul(1000)
        .saturating_add(now.tv_nsec as u64 / 1_000_000)
}

/// The calling process's id.
pub fn process_id() -> u32 {
    // SAFETY: getpid has no preconditions and cannot fail.
    unsafe { libc::getpid() as u32 }
}

/// Sleeps for `ms` milliseconds (tests' fault hooks only).
pub fn sleep_ms(ms: u64) {
    let request = libc::timespec {
        tv_sec: (ms / 1000) as libc::time_t,
        // Cannot wrap: below 1000 × 10^6.
        tv_nsec: (ms % 1000).wrapping_mul(1_000_000) as libc::c_long,
    };
    // SAFETY: `request` is a valid timespec; the remainder is not wanted.
    unsafe {
        libc::nanosleep(&request, ptr::null_mut());
    }
}

/// A deadline that recurs: `claim` says true to exactly one caller once
/// the deadline has passed, and sets the next one `period_ms` later (a
/// compare-and-swap: the others go on).
#[derive(Debug)]
pub struct Every {
    next_ms: AtomicU64,
}

impl Every {
    /// Due at once.
    pub const fn new() -> Self {
        Self {
            next_ms: AtomicU64::new(0),
        }
    }

    /// Claims the deadline at `now_ms`, if it has passed and nobody else
    /// claimed it.
    pub fn claim(&self, now_ms: u64, period_ms: u64) -> bool {
        let due = self.next_ms.load(Ordering::Relaxed);
        now_ms >= due
            && self
                .next_ms
                .compare_exchange(
                    due,
                    now_ms.saturating_add(period_ms),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }
}

impl Default for Every {
    fn default() -> Self {
        Self::new()
    }
}

/// Gives up the CPU.
pub fn yield_now() {
    // SAFETY: sched_yield has no preconditions.
    unsafe {
        libc::sched_yield();
    }
}

/// A pthread key whose destructor runs at thread exit.
#[derive(Clone, Copy, Debug)]
pub struct ThreadExitKey(libc::pthread_key_t);

/// Creates a key whose `destructor` runs, at thread exit, with the value the
/// thread set by [`ThreadExitKey::set`].
pub fn thread_exit_key(destructor: unsafe extern "C" fn(*mut c_void)) -> Option<ThreadExitKey> {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: `key` is a valid out-pointer; glibc's own bookkeeping for keys
    // uses its internal malloc, never the Rust global allocator.
    let rc = unsafe { libc::pthread_key_create(&mut key, Some(destructor)) };
    (rc == 0).then_some(ThreadExitKey(key))
}

impl ThreadExitKey {
    /// The key as a number, to keep in an atomic.
    pub fn raw(self) -> u32 {
        self.0
    }

    /// The key `raw` returned. Only numbers from [`ThreadExitKey::raw`]
    /// name keys; any other makes `set` fail (it is never unsafe).
    pub fn from_raw(raw: u32) -> Option<Self> {
        Some(Self(raw))
    }

    /// Sets the calling thread's value; non-null makes the destructor run.
    /// The pointer is stored, never dereferenced here.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn set(self, value: *mut c_void) -> bool {
        // SAFETY: the key was created by `thread_exit_key`.
        unsafe { libc::pthread_setspecific(self.0, value) == 0 }
    }
}

/// Registers fork handlers (see `pthread_atfork(3)`).
pub fn at_fork(prepare: extern "C" fn(), parent: extern "C" fn(), child: extern "C" fn()) -> bool {
    // SAFETY: the handlers are plain functions that live for the program.
    unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) == 0 }
}

/// Reads a small file (e.g. under `/sys`) into `buf`; returns the length read.
pub fn read_small_file(path: &CStr, buf: &mut [u8]) -> Option<usize> {
    // SAFETY: `path` is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut len = 0usize;
    while let Some(rest) = buf.get_mut(len..).filter(|rest| !rest.is_empty()) {
        // SAFETY: the destination is the unfilled tail of `buf`, valid for
        // `rest.len()` bytes.
        let n = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
        if n <= 0 {
            break;
        }
        // Cannot wrap: `read` returns at most `rest.len()`, so `len` stays
        // at most `buf.len()`.
        len = len.wrapping_add(n as usize);
    }
    // SAFETY: `fd` was opened above and is closed once.
    unsafe {
        libc::close(fd);
    }
    Some(len)
}

/// The CPU the calling thread runs on (not cached), from glibc's
/// `sched_getcpu`: the rseq area's CPU id where glibc registered one, else
/// the vDSO's `getcpu`, which reads it without entering the kernel (glibc
/// makes the system call itself only where there is no vDSO). It
/// allocates nothing. Per-thread mode asks on every slow path when nodes
/// follow CPUs; the `getcpu` system call it used to make was half of a
/// remote free's time on a virtual machine (156 ns per free).
pub fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu takes no arguments and touches no memory of
    // ours.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).ok()
}

/// Resident set size of this process in bytes, from `/proc/self/statm`.
pub fn resident_bytes() -> Option<usize> {
    let mut buf = [0u8; 128];
    let len = read_small_file(c"/proc/self/statm", &mut buf)?;
    let mut fields = buf.get(..len)?.split(|b| *b == b' ');
    fields.next()?;
    let pages = parse_decimal(fields.next()?)?;
    (pages as usize).checked_mul(page_size())
}

/// Parses an unsigned decimal number (surrounding whitespace allowed).
pub fn parse_decimal(bytes: &[u8]) -> Option<u64> {
    let digits = bytes.trim_ascii();
    if digits.is_empty() {
        return None;
    }
    let mut value: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        // Cannot wrap: `b` is an ASCII digit (checked above).
        value = value
            .checked_mul(10)?
            .checked_add(u64::from(b.wrapping_sub(b'0')))?;
    }
    Some(value)
}

/// An identifier of the calling thread that, unlike its TID, is the same in
/// a `fork()` child (the address of its thread control block).
pub fn current_thread() -> usize {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as usize }
}

/// Number of CPUs the system has configured.
pub fn cpu_count() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    if n > 0 {
        n as usize
    } else {
        1
    }
}

/// One more than the highest CPU id the kernel may ever report
/// (`nr_cpu_ids`): the last id of `/sys/devices/system/cpu/possible`, plus
/// one. The set of possible CPUs is fixed at boot; hot-plugged CPUs are
/// among them. `None` if the file cannot be read or parsed.
pub fn possible_cpu_ids() -> Option<usize> {
    let mut buf = [0u8; 256];
    let len = read_small_file(c"/sys/devices/system/cpu/possible", &mut buf)?;
    cpu_list_end(buf.get(..len)?)
}

/// One more than the highest id of a kernel CPU list (`0-3,8,10-11\n`);
/// `None` if the text is not one.
pub fn cpu_list_end(list: &[u8]) -> Option<usize> {
    let list = list.trim_ascii();
    let last = list.rsplit(|&byte| byte == b',' || byte == b'-').next()?;
    if last.is_empty()
        || !list
            .iter()
            .all(|&b| b.is_ascii_digit() || b == b',' || b == b'-')
    {
        return None;
    }
    let mut id: usize = 0;
    for &digit in last {
        id = id
            .checked_mul(10)?
            .checked_add(usize::from(digit.wrapping_sub(b'0')))?;
    }
    id.checked_add(1)
}

/// Where the kernel keeps the calling thread's current CPU: glibc's rseq
/// registration (`__rseq_offset` from the thread pointer), found once.
static RSEQ_OFFSET: core::sync::atomic::AtomicIsize = core::sync::atomic::AtomicIsize::new(0);
/// 0 = not looked up, 1 = rseq usable, 2 = not usable (use `getcpu`).
static RSEQ_STATE: AtomicU32 = AtomicU32::new(0);

/// Looks up glibc's rseq area once (at start-up; `dlsym` may use glibc's
/// malloc, never ours). Returns whether reads of the CPU id can use it.
///
/// glibc registers one rseq area per thread (unless told not to with
/// `GLIBC_TUNABLES=glibc.pthread.rseq=0`, or under a tool such as valgrind
/// that does not provide rseq): it lies at the thread pointer plus
/// `__rseq_offset`, and `__rseq_size` is 0 when there is none. The engine
/// never registers an area of its own.
pub fn init_rseq() -> bool {
    if RSEQ_STATE.load(Ordering::Acquire) != 0 {
        return RSEQ_STATE.load(Ordering::Relaxed) == 1;
    }
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name.
    let offset = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr()) };
    // SAFETY: as above.
    let size = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr()) };
    let usable = if offset.is_null() || size.is_null() {
        false
    } else {
        // SAFETY: glibc exports `__rseq_offset` as a `ptrdiff_t` and
        // `__rseq_size` as an `unsigned int`; both are constant after start.
        let (offset, size) = unsafe { (*(offset as *const isize), *(size as *const u32)) };
        RSEQ_OFFSET.store(offset, Ordering::Relaxed);
        // `cpu_id_start`, `cpu_id`, `rseq_cs` and `flags`: the original
        // 20 bytes of the ABI, all a critical section needs.
        size >= 20
    };
    RSEQ_STATE.store(if usable { 1 } else { 2 }, Ordering::Release);
    // A size but no CPU id (-1: registration failed, e.g. under a tool
    // that does not provide rseq): not usable either.
    if usable && current_rseq_cpu().is_none() {
        RSEQ_STATE.store(2, Ordering::Release);
        return false;
    }
    usable
}

/// Whether threads may set and read their own GS segment base with
/// `wrgsbase` and `rdgsbase` (the CPU has FSGSBASE and the kernel, 5.9 or
/// later, enabled it: `AT_HWCAP2` bit 1). Per-CPU mode addresses each
/// thread's current CPU's cache through GS, and needs it.
#[cfg(target_arch = "x86_64")]
pub fn gs_base_writable() -> bool {
    const HWCAP2_FSGSBASE: libc::c_ulong = 1 << 1;
    // SAFETY: `getauxval` reads the auxiliary vector; no preconditions.
    unsafe { libc::getauxval(libc::AT_HWCAP2) & HWCAP2_FSGSBASE != 0 }
}

/// Not x86-64: there is no GS base to use.
#[cfg(not(target_arch = "x86_64"))]
pub fn gs_base_writable() -> bool {
    false
}

/// The calling thread's GS segment base.
///
/// # Safety
///
/// 1. [`gs_base_writable`] returned true (else `rdgsbase` faults).
#[cfg(target_arch = "x86_64")]
#[inline]
pub unsafe fn gs_base() -> usize {
    let base: usize;
    // SAFETY: duty 1: the kernel enabled the instruction; it reads a
    // register of this thread and touches no memory.
    unsafe {
        core::arch::asm!("rdgsbase {}", out(reg) base, options(nomem, nostack, preserves_flags))
    };
    base
}

/// Sets the calling thread's GS segment base (the kernel saves and restores
/// it with the thread; new threads start with their creator's).
///
/// # Safety
///
/// 1. [`gs_base_writable`] returned true (else `wrgsbase` faults).
/// 2. Nothing else in the process uses this thread's GS base.
#[cfg(target_arch = "x86_64")]
#[inline]
pub unsafe fn set_gs_base(base: usize) {
    // SAFETY: duty 1: the kernel enabled the instruction; it writes a
    // register of this thread (duty 2: one only this engine reads).
    unsafe { core::arch::asm!("wrgsbase {}", in(reg) base, options(nostack, preserves_flags)) };
}

/// True when glibc's rseq area is registered for this process.
pub fn rseq_available() -> bool {
    RSEQ_STATE.load(Ordering::Acquire) == 1
}

/// The calling thread's rseq area (`struct rseq`: `cpu_id` at offset 4,
/// `rseq_cs` at offset 8), or null where there is none.
#[inline(always)]
pub fn rseq_area() -> *mut u8 {
    if RSEQ_STATE.load(Ordering::Relaxed) != 1 {
        return ptr::null_mut();
    }
    thread_pointer().wrapping_add_signed(RSEQ_OFFSET.load(Ordering::Relaxed)) as *mut u8
}

/// The thread pointer (`%fs:0` on x86-64 Linux: the thread control block's
/// own address).
#[inline(always)]
fn thread_pointer() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        let pointer: usize;
        // SAFETY: on x86-64 Linux, %fs:0 holds the thread control block's
        // own address; reading it has no side effects.
        unsafe {
            core::arch::asm!("mov {}, fs:0", out(reg) pointer, options(nostack, readonly, preserves_flags))
        };
        pointer
    }
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// The CPU id the kernel keeps in the rseq area, if registered and set.
pub fn current_rseq_cpu() -> Option<u32> {
    let area = rseq_area();
    if area.is_null() {
        return None;
    }
    // SAFETY: glibc registered an rseq area of at least 20 bytes at
    // `thread pointer + __rseq_offset` for every thread (`init_rseq`);
    // `cpu_id` is the u32 at offset 4, written by the kernel, hence the
    // volatile read.
    let cpu = unsafe { ptr::read_volatile(area.wrapping_add(4) as *const u32) };
    ((cpu as i32) >= 0).then_some(cpu)
}

const MEMBARRIER_CMD_QUERY: libc::c_int = 0;
const MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ: libc::c_int = 1 << 7;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ: libc::c_int = 1 << 8;
const MEMBARRIER_CMD_FLAG_CPU: libc::c_uint = 1;

/// Registers the process for `membarrier(PRIVATE_EXPEDITED_RSEQ)`; false
/// where the kernel has no such command. Once per process (a fork child
/// registers again: the registration belongs to the address space).
pub fn membarrier_register_rseq() -> bool {
    // SAFETY: membarrier takes integer arguments only.
    let supported =
        unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_QUERY, 0u32, 0i32) };
    if supported < 0 || supported & libc::c_long::from(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ) == 0 {
        return false;
    }
    // SAFETY: as above.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ,
            0u32,
            0i32,
        )
    };
    rc == 0
}

/// Restarts every rseq critical section running on `cpu` and waits until
/// none that began before this call is still running there
/// (`membarrier(PRIVATE_EXPEDITED_RSEQ, FLAG_CPU, cpu)`).
pub fn membarrier_rseq_cpu(cpu: u32) -> bool {
    // SAFETY: membarrier takes integer arguments only.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ,
            MEMBARRIER_CMD_FLAG_CPU,
            cpu as libc::c_int,
        )
    };
    rc == 0
}

/// The CPU the calling thread runs on: the rseq area's `cpu_id`, kept
/// current by the kernel at every migration (one load), else `getcpu`.
pub fn current_cpu_fast() -> Option<u32> {
    current_rseq_cpu().or_else(current_cpu)
}

/// How slab memory is tied to its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumaBindMode {
    /// Do not bind (one node, or simulated nodes).
    Off,
    /// Prefer the node (`MPOL_PREFERRED`): the kernel takes pages from
    /// another node when this one is full instead of failing, so binding
    /// can never cause an out-of-memory kill. A failed `mbind` is counted
    /// and the memory used anyway.
    Advisory,
    /// Only the node (`MPOL_BIND`): pages come from it or the allocation
    /// fails; a failed `mbind` fails the refill that needed the memory.
    Strict,
}

/// Ties `[ptr, ptr + bytes)` to OS node `os_node`: `MPOL_PREFERRED` in
/// advisory mode, `MPOL_BIND` in strict mode (`Off` does nothing).
pub fn bind_to_node(ptr: NonNull<u8>, bytes: usize, os_node: u32, mode: NumaBindMode) -> bool {
    const MPOL_PREFERRED: libc::c_int = 1;
    const MPOL_BIND: libc::c_int = 2;
    let policy = match mode {
        NumaBindMode::Off => return true,
        NumaBindMode::Advisory => MPOL_PREFERRED,
        NumaBindMode::Strict => MPOL_BIND,
    };
    const MASK_WORDS: usize = 16;
    let mut mask = [0u64; MASK_WORDS];
    let Some(word) = mask.get_mut(os_node as usize / 64) else {
        return false;
    };
    *word = 1u64 << (os_node % 64);
    // SAFETY: the range is committed memory of this allocator (module
    // contract); the node mask is a valid array of `MASK_WORDS * 64` bits.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mbind,
            ptr.as_ptr(),
            bytes,
            policy,
            mask.as_ptr(),
            (MASK_WORDS * 64) as u64,
            0u32,
        )
    };
    rc == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_cpu_is_the_one_the_thread_is_pinned_to() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        std::thread::spawn(move || {
            for cpu in (0..cpus).rev() {
                // SAFETY: a zeroed cpu_set_t is a valid empty set; the calls
                // touch only it and the calling thread's affinity.
                let pinned = unsafe {
                    let mut set: libc::cpu_set_t = core::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set) == 0
                };
                if pinned {
                    assert_eq!(current_cpu(), Some(cpu as u32));
                    assert_eq!(current_cpu_fast(), Some(cpu as u32));
                }
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn cpu_lists_end_one_past_their_last_id() {
        assert_eq!(cpu_list_end(b"0\n"), Some(1));
        assert_eq!(cpu_list_end(b"0-1\n"), Some(2));
        assert_eq!(cpu_list_end(b"0-3,8,10-11\n"), Some(12));
        assert_eq!(cpu_list_end(b"0-1023"), Some(1024));
        for bad in [&b""[..], b"\n", b"0-", b"zero", b"0-3,x", b"-"] {
            assert_eq!(cpu_list_end(bad), None, "{:?}", core::str::from_utf8(bad));
        }
    }

    #[test]
    fn this_machine_reports_its_possible_cpus() {
        let ids = possible_cpu_ids().expect("/sys/devices/system/cpu/possible");
        // Every configured CPU is a possible one.
        assert!(ids >= cpu_count(), "{ids} < {}", cpu_count());
        if let Some(cpu) = current_cpu() {
            assert!((cpu as usize) < ids, "cpu {cpu} of {ids}");
        }
    }
}
