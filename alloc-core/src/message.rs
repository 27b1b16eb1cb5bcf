//! Messages built on the stack: the engine's diagnostics are formatted
//! with `core::fmt` into a fixed buffer and written to stderr without
//! allocating (a message longer than the buffer is cut short).

use core::fmt;

/// A message of at most `N` bytes.
pub struct Message<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Message<N> {
    /// An empty message.
    pub const fn new() -> Self {
        Self {
            bytes: [0; N],
            len: 0,
        }
    }

    /// Appends raw bytes (as many as fit).
    pub fn push(&mut self, part: &[u8]) {
        let room = self.bytes.get_mut(self.len..).unwrap_or(&mut []);
        let taken = part.len().min(room.len());
        if let (Some(to), Some(from)) = (room.get_mut(..taken), part.get(..taken)) {
            to.copy_from_slice(from);
            self.len = self.len.saturating_add(taken);
        }
    }

    /// What was written.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&[])
    }

    /// Writes the message to stderr.
    pub fn write_to_stderr(&self) {
        crate::os::write_stderr(self.as_bytes());
    }
}

impl<const N: usize> Default for Message<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> fmt::Write for Message<N> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        self.push(text.as_bytes());
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use core::fmt::Write;

    #[test]
    fn formats_and_cuts_short() {
        let mut message = Message::<16>::new();
        let (capacity, name) = (128, "size-256");
        write!(message, "capacity {capacity} of {name}").unwrap();
        assert_eq!(message.as_bytes(), b"capacity 128 of ");
        let mut short = Message::<64>::new();
        short.push(b"ok");
        assert_eq!(short.as_bytes(), b"ok");
    }
}
