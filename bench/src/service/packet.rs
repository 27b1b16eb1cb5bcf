//! Packet buffers for the hand-off workloads: real packet sizes, and a
//! header and trailer the receiving thread checks before it frees them.
//!
//! Layout of a packet of `size` bytes (`size >= MIN_SIZE`):
//!
//! | bytes | holds |
//! |---|---|
//! | `0..4` | `size` |
//! | `4..8` | the producer's number |
//! | `8..16` | the producer's sequence number |
//! | `16..min(64, size - 8)` | the sequence number's low byte, repeated (a header's worth of writes) |
//! | `size - 8..size` | `sequence ^ TRAILER_KEY` (touches the far end, so a short block shows) |
//!
//! Both sides fold each packet into a [`Checksum`] (count and a hash of
//! size, producer and sequence): the consumers' sum equals the producers'
//! only if every packet arrived once, intact.
//!
//! Packets come from `std::alloc::alloc`, that is from the binary's global
//! allocator.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};

/// The packet sizes of the hand-off workloads: a TCP ACK's buffer, a
/// socket-buffer head, a 1500-byte MTU payload, and a 2112-byte receive
/// buffer (MTU + headroom + shared info). Two below 1 KiB, two above.
pub const SIZES: [usize; 4] = [64, 256, 1500, 2112];
/// The smallest packet (room for the fields and the trailer).
pub const MIN_SIZE: usize = 64;
/// End of the header's repeated byte.
const HEADER: usize = 64;
/// Mixed into the trailer so that it differs from the header.
const TRAILER_KEY: u64 = 0x5eaf_a110_c0de_f00d;

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, 8).expect("packet sizes are small")
}

/// Count and hash of the packets one side saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checksum {
    /// Packets.
    pub packets: u64,
    /// Wrapping sum of each packet's hash.
    pub hash: u64,
}

impl Checksum {
    /// Folds one packet in.
    #[inline]
    pub fn add(&mut self, size: usize, producer: u32, sequence: u64) {
        self.packets += 1;
        let key = (sequence << 16) ^ (u64::from(producer) << 48) ^ size as u64;
        self.hash = self
            .hash
            .wrapping_add(key.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    }

    /// Adds another side's sums (of other packets).
    pub fn merge(&mut self, other: Checksum) {
        self.packets += other.packets;
        self.hash = self.hash.wrapping_add(other.hash);
    }
}

/// Allocates a `size`-byte packet (`size >= MIN_SIZE`) and writes its
/// header and trailer; aborts if the allocator fails.
#[inline]
pub fn new(size: usize, producer: u32, sequence: u64) -> *mut u8 {
    assert!(size >= MIN_SIZE, "packets are at least {MIN_SIZE} bytes");
    let layout = layout(size);
    // SAFETY: the layout has a non-zero size.
    let packet = unsafe { alloc(layout) };
    if packet.is_null() {
        handle_alloc_error(layout);
    }
    // SAFETY: `packet` is a fresh, 8-aligned block of `size >= MIN_SIZE`
    // bytes that only this thread knows; every write below stays within
    // it (the fill ends at `min(HEADER, size - 8) >= 16`, the trailer is
    // the last 8 bytes, written unaligned since 1500 is not a multiple
    // of 8).
    unsafe {
        packet.cast::<u32>().write(size as u32);
        packet.add(4).cast::<u32>().write(producer);
        packet.add(8).cast::<u64>().write(sequence);
        let fill_end = HEADER.min(size - 8);
        packet.add(16).write_bytes(sequence as u8, fill_end - 16);
        packet
            .add(size - 8)
            .cast::<u64>()
            .write_unaligned(sequence ^ TRAILER_KEY);
    }
    packet
}

/// What the receiver found in a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Its size field.
    pub size: usize,
    /// Its producer.
    pub producer: u32,
    /// Its sequence number.
    pub sequence: u64,
    /// Whether the header fill and the trailer were as written.
    pub intact: bool,
}

/// Reads and checks a packet, then frees it.
///
/// # Safety
///
/// `packet` must come from [`new`], not be freed yet, and its writes must
/// be visible to this thread (handed over with Release/Acquire); it is
/// freed here, so the caller must not use it again.
#[inline]
pub unsafe fn check_and_free(packet: *mut u8) -> Seen {
    // SAFETY: per the contract the packet is live and at least MIN_SIZE
    // bytes long, so its first 16 bytes can be read.
    let (size, producer, sequence) = unsafe {
        (
            packet.cast::<u32>().read() as usize,
            packet.add(4).cast::<u32>().read(),
            packet.add(8).cast::<u64>().read(),
        )
    };
    if !SIZES.contains(&size) {
        // A size never allocated: reading further, or freeing with it,
        // would be wrong. Leak the packet and report it as corrupt.
        return Seen {
            size,
            producer,
            sequence,
            intact: false,
        };
    }
    let fill_end = HEADER.min(size - 8);
    // SAFETY: `size` is one of SIZES, the size `new` allocated (a block
    // whose size field was overwritten by a wrong but valid size is still
    // caught by the checks below or by the checksum); every read stays
    // within `size` bytes.
    let intact = unsafe {
        let fill = std::slice::from_raw_parts(packet.add(16), fill_end - 16);
        let trailer = packet.add(size - 8).cast::<u64>().read_unaligned();
        fill.iter().all(|&b| b == sequence as u8) && trailer == sequence ^ TRAILER_KEY
    };
    // SAFETY: `new` allocated the packet with this layout (its size field
    // says so), and the caller gives it up.
    unsafe { dealloc(packet, layout(size)) };
    Seen {
        size,
        producer,
        sequence,
        intact,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_size() {
        let (mut sent, mut received) = (Checksum::default(), Checksum::default());
        for (i, &size) in SIZES.iter().enumerate() {
            let packet = new(size, 3, 1000 + i as u64);
            sent.add(size, 3, 1000 + i as u64);
            // SAFETY: made just above on this thread, freed once.
            let seen = unsafe { check_and_free(packet) };
            assert!(seen.intact);
            assert_eq!((seen.size, seen.producer), (size, 3));
            received.add(seen.size, seen.producer, seen.sequence);
        }
        assert_eq!(sent, received);
        let mut other = Checksum::default();
        other.add(64, 3, 7);
        assert_ne!(sent, {
            let mut s = received;
            s.merge(other);
            s
        });
    }
}
