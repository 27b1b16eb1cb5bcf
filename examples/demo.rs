//! Placeholder demo.
fn main() {}
