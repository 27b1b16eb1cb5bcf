//! Shared code of the example programs: a request/response service over
//! loopback TCP with its own load generator (what the demo runs), and
//! small reporting helpers. The library declares no global allocator: each
//! binary picks its own, which is the point.
#![warn(missing_docs)]

pub mod report;
pub mod rr;
