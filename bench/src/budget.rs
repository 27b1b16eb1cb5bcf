//! The fast-path instruction budget: how many instructions one alloc+free
//! pair may take through sheafalloc as the `#[global_allocator]`, per
//! request size, kept in `bench/budget.toml` and checked in CI (the idea
//! of tcmalloc's golden fast-path tests).
//!
//! The `fastpath-budget` binary counts each entry's pair loop under
//! callgrind (two runs, `N1` and `N2` pairs; the difference over `N2 - N1`
//! is one pair, loop included) and fails when a count exceeds its budget.
//!
//! The file is a small subset of TOML: `# comments`, one `[name]` table
//! per entry, and in each `request_bytes = N`, `budget = N` (instructions
//! per pair) and optionally `target = N` (what the budget should come down
//! to) or `target_vs = "other"` with `target_ratio = R` (at most R times
//! the other entry's count). Targets are reported, not enforced.

use std::fmt::Write as _;

/// Pairs of the shorter run.
pub const N1: u64 = 100_000;
/// Pairs of the longer run.
pub const N2: u64 = 1_100_000;

/// One entry of the budget file.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The table's name (`small`, `packet`).
    pub name: String,
    /// Request size in bytes.
    pub request_bytes: usize,
    /// Instructions per pair allowed.
    pub budget: f64,
    /// Instructions per pair aimed at, if stated.
    pub target: Option<f64>,
    /// Another entry this one's count is compared with, and the ratio
    /// aimed at.
    pub target_vs: Option<(String, f64)>,
}

/// Parses the budget file's text.
pub fn parse(text: &str) -> Result<Vec<Entry>, String> {
    let mut entries: Vec<Entry> = Vec::new();
    let mut ratio_pending: Vec<(usize, String)> = Vec::new();
    let mut ratios: Vec<(usize, f64)> = Vec::new();
    for (number, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        let at = |what: String| format!("line {}: {what}", number + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            entries.push(Entry {
                name: name.trim().to_owned(),
                request_bytes: 0,
                budget: f64::NAN,
                target: None,
                target_vs: None,
            });
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| at(format!("expected `key = value`, got {line:?}")))?;
        let (key, value) = (key.trim(), value.trim());
        let index = entries
            .len()
            .checked_sub(1)
            .ok_or_else(|| at("a key before the first [table]".into()))?;
        let entry = &mut entries[index];
        let number = || {
            value
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v > 0.0)
                .ok_or_else(|| at(format!("{key}: not a positive number: {value:?}")))
        };
        match key {
            "request_bytes" => entry.request_bytes = number()? as usize,
            "budget" => entry.budget = number()?,
            "target" => entry.target = Some(number()?),
            "target_ratio" => ratios.push((index, number()?)),
            "target_vs" => {
                let other = value
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .ok_or_else(|| at(format!("target_vs: not a \"string\": {value}")))?;
                ratio_pending.push((index, other.to_owned()));
            }
            other => return Err(at(format!("unknown key {other:?}"))),
        }
    }
    for (index, other) in ratio_pending {
        let ratio = ratios
            .iter()
            .find(|(i, _)| *i == index)
            .map(|(_, r)| *r)
            .ok_or_else(|| format!("[{}]: target_vs without target_ratio", entries[index].name))?;
        entries[index].target_vs = Some((other, ratio));
    }
    for entry in &entries {
        if entry.request_bytes == 0 || !entry.budget.is_finite() {
            return Err(format!("[{}]: needs request_bytes and budget", entry.name));
        }
        if let Some((other, _)) = &entry.target_vs {
            if !entries.iter().any(|e| &e.name == other) {
                return Err(format!(
                    "[{}]: target_vs names no entry: {other}",
                    entry.name
                ));
            }
        }
    }
    if entries.is_empty() {
        return Err("no entries".into());
    }
    Ok(entries)
}

/// One entry's measurement.
#[derive(Clone, Debug)]
pub struct Measured {
    /// The entry.
    pub entry: Entry,
    /// Instructions per pair.
    pub per_pair: f64,
}

/// Whether every count is within its budget.
pub fn within_budget(measured: &[Measured]) -> bool {
    measured.iter().all(|m| m.per_pair <= m.entry.budget)
}

/// The table printed by the check: measured, budget, result, and where
/// each count stands against its target.
pub fn table(measured: &[Measured]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| entry | request | measured (instructions per pair) | budget | result | target |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---|---|");
    for m in measured {
        let e = &m.entry;
        let result = if m.per_pair <= e.budget {
            "within budget"
        } else {
            "OVER BUDGET"
        };
        let mut target = Vec::new();
        if let Some(t) = e.target {
            target.push(format!(
                "≤ {t:.0}: {}",
                if m.per_pair <= t { "met" } else { "not yet" }
            ));
        }
        if let Some((other, ratio)) = &e.target_vs {
            if let Some(o) = measured.iter().find(|o| &o.entry.name == other) {
                let limit = ratio * o.per_pair;
                target.push(format!(
                    "≤ {ratio} × {other} = {limit:.1}: {} ({:.2}×)",
                    if m.per_pair <= limit {
                        "met"
                    } else {
                        "not yet"
                    },
                    m.per_pair / o.per_pair
                ));
            }
        }
        let _ = writeln!(
            out,
            "| {} | {} B | {:.2} | {} | {result} | {} |",
            e.name,
            e.request_bytes,
            m.per_pair,
            e.budget,
            if target.is_empty() {
                "–".to_owned()
            } else {
                target.join("; ")
            }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
# comment
[small]
request_bytes = 256   # a head
budget = 54
target = 40

[packet]
request_bytes = 2112
budget = 130
target_vs = \"small\"
target_ratio = 1.3
";

    #[test]
    fn parses_the_budget_file() {
        let entries = parse(FILE).expect("a valid file");
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].name, "small");
        assert_eq!(entries[0].request_bytes, 256);
        assert_eq!(entries[0].budget, 54.0);
        assert_eq!(entries[0].target, Some(40.0));
        assert_eq!(entries[1].target_vs, Some(("small".into(), 1.3)));
        assert!(parse("budget = 3\n").is_err());
        assert!(parse("[a]\nrequest_bytes = 8\n").is_err());
        assert!(parse("[a]\nrequest_bytes = 8\nbudget = 9\ncolour = 1\n").is_err());
        assert!(
            parse("[a]\nrequest_bytes = 8\nbudget = 9\ntarget_vs = \"b\"\ntarget_ratio = 2\n")
                .is_err()
        );
    }

    #[test]
    fn fails_only_over_budget() {
        let entries = parse(FILE).unwrap();
        let at = |small: f64, packet: f64| {
            vec![
                Measured {
                    entry: entries[0].clone(),
                    per_pair: small,
                },
                Measured {
                    entry: entries[1].clone(),
                    per_pair: packet,
                },
            ]
        };
        assert!(within_budget(&at(54.0, 100.0)));
        assert!(!within_budget(&at(54.5, 100.0)));
        assert!(!within_budget(&at(40.0, 131.0)));
        let text = table(&at(50.0, 131.0));
        assert!(text.contains("OVER BUDGET"));
        assert!(text.contains("≤ 40: not yet"));
    }
}
