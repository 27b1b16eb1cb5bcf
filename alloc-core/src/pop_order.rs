//! The order in which a stolen full sheaf hands out its objects.
//!
//! A full sheaf taken from another lane's barn stack carries a hand-off's
//! objects in the order the other CPU freed them, and the taker's pops
//! would run that order backwards. The exchange sorts such a sheaf
//! (`exchange::take_full`) so that its pops run in address order, which
//! lets the prefetchers fetch the next objects' lines from the other core
//! ahead of their use. Which direction they reward is the CPU's: on an
//! AMD EPYC of family 26 ascending pops took `handoff-1to1` from 17 to 23
//! M obj/s with the vCPUs close, while on one of family 25 (model 17)
//! descending pops ran 5–14 % faster than ascending ones, close and apart
//! (docs/PERFORMANCE.md, "The sort on the family-25 host"). So the order
//! is chosen per CPU family at initialisation: descending on AMD family
//! 25, ascending everywhere else (the order measured where it helped the
//! most). A CPU not in this table keeps ascending pops until measured.

use core::sync::atomic::{AtomicBool, Ordering};

/// The direction in which a stolen sheaf's pops walk the addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PopOrder {
    /// Lowest address first.
    Ascending,
    /// Highest address first.
    Descending,
}

/// Whether stolen sheaves pop in descending order (false until
/// initialisation decides otherwise).
static DESCENDING: AtomicBool = AtomicBool::new(false);

/// Decides the order for this CPU, once, during the engine's
/// initialisation.
pub(crate) fn init() {
    let order = for_cpu(cpu_vendor_and_family());
    DESCENDING.store(order == PopOrder::Descending, Ordering::Release);
}

/// The order a stolen sheaf's pops follow.
#[inline]
pub fn stolen() -> PopOrder {
    if DESCENDING.load(Ordering::Relaxed) {
        PopOrder::Descending
    } else {
        PopOrder::Ascending
    }
}

/// The order for a CPU of this vendor and family (`None`: not known).
fn for_cpu(cpu: Option<(Vendor, u32)>) -> PopOrder {
    match cpu {
        Some((Vendor::Amd, 0x19)) => PopOrder::Descending,
        _ => PopOrder::Ascending,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Vendor {
    Amd,
    Other,
}

/// The CPU's vendor and family (base family plus extended family, as
/// the manuals define it), from `cpuid`.
#[cfg(target_arch = "x86_64")]
fn cpu_vendor_and_family() -> Option<(Vendor, u32)> {
    use core::arch::x86_64::__cpuid;
    // Leaf 0's vendor string, in EBX, EDX, ECX: "AuthenticAMD".
    let leaf0 = __cpuid(0);
    if leaf0.eax < 1 {
        return None;
    }
    let amd = (leaf0.ebx, leaf0.edx, leaf0.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163);
    let signature = __cpuid(1).eax;
    let base = (signature >> 8) & 0xf;
    // Cannot wrap: a 4-bit and an 8-bit field.
    let family = if base == 0xf {
        base.wrapping_add((signature >> 20) & 0xff)
    } else {
        base
    };
    Some((if amd { Vendor::Amd } else { Vendor::Other }, family))
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_vendor_and_family() -> Option<(Vendor, u32)> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amd_family_25_pops_descending_and_every_other_cpu_ascending() {
        assert_eq!(for_cpu(Some((Vendor::Amd, 0x19))), PopOrder::Descending);
        assert_eq!(for_cpu(Some((Vendor::Amd, 0x1a))), PopOrder::Ascending);
        assert_eq!(for_cpu(Some((Vendor::Amd, 0x17))), PopOrder::Ascending);
        assert_eq!(for_cpu(Some((Vendor::Other, 0x19))), PopOrder::Ascending);
        assert_eq!(for_cpu(Some((Vendor::Other, 6))), PopOrder::Ascending);
        assert_eq!(for_cpu(None), PopOrder::Ascending);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_family_read_from_cpuid_matches_proc_cpuinfo() {
        let Ok(text) = std::fs::read_to_string("/proc/cpuinfo") else {
            return;
        };
        // As the bench's machine description reads it (`bench/src/machine.rs`).
        let field = |name: &str| {
            text.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                (key.trim() == name).then(|| value.trim().to_owned())
            })
        };
        let (vendor, family) = cpu_vendor_and_family().expect("cpuid leaf 1");
        if let Some(expected) = field("cpu family") {
            assert_eq!(family.to_string(), expected);
        }
        if let Some(id) = field("vendor_id") {
            assert_eq!(vendor == Vendor::Amd, id == "AuthenticAMD");
        }
    }
}
