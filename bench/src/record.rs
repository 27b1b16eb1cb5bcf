//! The one machine-readable line a workload run prints, and its parser.
//!
//! Format: `result key=value key=value ...` on a line of its own; keys and
//! values contain no spaces or `=`. Every line has `workload`, `allocator`,
//! `value` and `unit`; workloads add their own keys (round trip, RSS,
//! counters).

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The prefix that marks the result line among other output.
pub const PREFIX: &str = "result ";

/// One run's result: ordered `key=value` fields.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Record {
    fields: Vec<(String, String)>,
}

impl Record {
    /// An empty record.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) `key` with `value`; spaces and `=` in the value
    /// become `_`.
    pub fn set(&mut self, key: &str, value: impl std::fmt::Display) -> &mut Self {
        let value: String = value
            .to_string()
            .chars()
            .map(|c| {
                if c.is_whitespace() || c == '=' {
                    '_'
                } else {
                    c
                }
            })
            .collect();
        match self.fields.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => self.fields.push((key.to_owned(), value)),
        }
        self
    }

    /// Adds a number with `decimals` digits after the point.
    pub fn set_f64(&mut self, key: &str, value: f64, decimals: usize) -> &mut Self {
        self.set(key, format!("{value:.decimals$}"))
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `key` as a number (NaN if absent or not a number).
    pub fn number(&self, key: &str) -> f64 {
        self.get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN)
    }

    /// The fields in order.
    pub fn fields(&self) -> &[(String, String)] {
        &self.fields
    }

    /// The line, prefix included, without a newline.
    pub fn line(&self) -> String {
        let mut out = PREFIX.trim_end().to_owned();
        for (key, value) in &self.fields {
            let _ = write!(out, " {key}={value}");
        }
        out
    }

    /// Parses the last result line of `output`.
    pub fn parse_output(output: &str) -> Option<Record> {
        output.lines().rev().find_map(Record::parse_line)
    }

    /// Parses one line, if it is a result line.
    pub fn parse_line(line: &str) -> Option<Record> {
        let rest = line.strip_prefix(PREFIX)?;
        let mut record = Record::new();
        for field in rest.split_whitespace() {
            let (key, value) = field.split_once('=')?;
            record.fields.push((key.to_owned(), value.to_owned()));
        }
        Some(record)
    }

    /// The fields as a map (for lookups by many keys).
    pub fn to_map(&self) -> BTreeMap<&str, &str> {
        self.fields
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_a_line() {
        let mut record = Record::new();
        record
            .set("workload", "tcp-rr")
            .set_f64("value", 12.345, 2)
            .set("note", "two words=x");
        let line = record.line();
        assert_eq!(line, "result workload=tcp-rr value=12.35 note=two_words_x");
        let output = format!("noise\n{line}\nmore noise\n");
        let parsed = Record::parse_output(&output).expect("a result line");
        assert_eq!(parsed, record);
        assert_eq!(parsed.number("value"), 12.35);
        assert!(parsed.number("missing").is_nan());
        assert_eq!(Record::parse_line("result broken"), None);
    }
}
