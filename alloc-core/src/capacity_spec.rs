//! `SHEAFALLOC_CAPACITY`: capacities set at start, e.g.
//! `size-256=128,size-2304=64`. Each entry pins its cache (the auto-tuner
//! leaves it alone). A bad entry is reported, with what is wrong with it,
//! and skipped; the other entries still apply. Parsing allocates nothing:
//! it runs during the engine's initialisation.

use core::fmt;

use crate::cache::max_sheaf_capacity;
use crate::size_class::SizeClass;

/// One entry of a capacity list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapacityEntry {
    /// The cache.
    pub class: SizeClass,
    /// The capacity asked for (within the cache's range).
    pub capacity: u32,
}

/// What is wrong with an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryError<'a> {
    /// Not `name=number`.
    Malformed(&'a [u8]),
    /// No cache has this name.
    UnknownCache(&'a [u8]),
    /// The capacity is not a whole number.
    NotANumber(&'a [u8]),
    /// The capacity is outside the cache's range `1..=max`.
    OutOfRange {
        /// The cache.
        class: SizeClass,
        /// The value asked for.
        requested: u64,
        /// Its largest capacity.
        max: u32,
    },
}

/// Shows bytes that should be text, replacing what is not UTF-8.
struct Text<'a>(&'a [u8]);

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for chunk in self.0.utf8_chunks() {
            f.write_str(chunk.valid())?;
            if !chunk.invalid().is_empty() {
                f.write_str("\u{fffd}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for EntryError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Malformed(entry) => write!(
                f,
                "\"{}\" is not of the form size-<bytes>=<capacity>",
                Text(entry)
            ),
            Self::UnknownCache(name) => write!(
                f,
                "no cache named \"{}\" (names look like size-256)",
                Text(name)
            ),
            Self::NotANumber(value) => {
                write!(f, "capacity \"{}\" is not a whole number", Text(value))
            }
            Self::OutOfRange {
                class,
                requested,
                max,
            } => write!(
                f,
                "capacity {requested} is outside the range 1..={max} of {}",
                class.name()
            ),
        }
    }
}

/// The entries of `spec`, comma-separated, each parsed on its own (empty
/// entries, e.g. a trailing comma, are skipped).
pub fn parse(spec: &[u8]) -> impl Iterator<Item = Result<CapacityEntry, EntryError<'_>>> {
    spec.split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|entry| !entry.is_empty())
        .map(parse_entry)
}

fn parse_entry(entry: &[u8]) -> Result<CapacityEntry, EntryError<'_>> {
    let mut parts = entry.splitn(2, |&b| b == b'=');
    let (Some(name), Some(value)) = (parts.next(), parts.next()) else {
        return Err(EntryError::Malformed(entry));
    };
    let (name, value) = (name.trim_ascii(), value.trim_ascii());
    let class = core::str::from_utf8(name)
        .ok()
        .and_then(SizeClass::from_name)
        .ok_or(EntryError::UnknownCache(name))?;
    let requested = crate::os::parse_decimal(value).ok_or(EntryError::NotANumber(value))?;
    let max = max_sheaf_capacity(class);
    match u32::try_from(requested) {
        Ok(capacity) if (1..=max).contains(&capacity) => Ok(CapacityEntry { class, capacity }),
        _ => Err(EntryError::OutOfRange {
            class,
            requested,
            max,
        }),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::string::ToString;
    use std::vec::Vec;

    fn class(name: &str) -> SizeClass {
        SizeClass::from_name(name).unwrap()
    }

    #[test]
    fn good_entries_parse_and_bad_ones_say_why() {
        let spec = b" size-256=128, size-2304 = 64,,size-255=8,size-64,size-512=x,size-262144=3,";
        let results: Vec<_> = parse(spec).collect();
        assert_eq!(results.len(), 6);
        assert_eq!(
            results[0],
            Ok(CapacityEntry {
                class: class("size-256"),
                capacity: 128
            })
        );
        assert_eq!(
            results[1],
            Ok(CapacityEntry {
                class: class("size-2304"),
                capacity: 64
            })
        );
        let messages: Vec<_> = results[2..]
            .iter()
            .map(|r| r.unwrap_err().to_string())
            .collect();
        assert_eq!(
            messages,
            [
                "no cache named \"size-255\" (names look like size-256)",
                "\"size-64\" is not of the form size-<bytes>=<capacity>",
                "capacity \"x\" is not a whole number",
                "capacity 3 is outside the range 1..=2 of size-262144",
            ]
        );
    }

    #[test]
    fn zero_and_huge_capacities_are_out_of_range() {
        for value in ["0", "1025", "99999999999999999999"] {
            let spec = std::format!("size-256={value}");
            let result = parse(spec.as_bytes()).next().unwrap();
            assert!(
                matches!(
                    result,
                    Err(EntryError::OutOfRange { .. }) | Err(EntryError::NotANumber(_))
                ),
                "{value}: {result:?}"
            );
        }
        assert_eq!(parse(b"").count(), 0);
    }
}
