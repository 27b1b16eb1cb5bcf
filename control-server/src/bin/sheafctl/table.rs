//! Tables and the formatting of their cells: bytes, shares, CPU lists.

use sheafalloc_control::caches::CacheView;

/// A table: a header and rows of cells, the first column left-aligned,
/// the others right-aligned.
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Self {
            rows: vec![header.iter().map(|cell| (*cell).to_owned()).collect()],
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as lines, each ending in a newline.
    pub fn render(&self) -> String {
        let columns = self.rows.first().map_or(0, Vec::len);
        let widths: Vec<usize> = (0..columns)
            .map(|column| {
                self.rows
                    .iter()
                    .map(|row| row.get(column).map_or(0, |cell| cell.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(column, (cell, width))| {
                    if column == 0 {
                        format!("{cell:<width$}")
                    } else {
                        format!("{cell:>width$}")
                    }
                })
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
        out
    }
}

/// `part / whole`, or `None` when `whole` is zero.
pub fn share(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// `12.3%`, or `-`.
pub fn percent(share: Option<f64>) -> String {
    share.map_or_else(|| "-".to_owned(), |share| format!("{:.1}%", share * 100.0))
}

/// The tuning state, or `?` when the sidecar does not report one.
pub fn tuning(tuning: Option<&str>) -> String {
    tuning.unwrap_or("?").to_owned()
}

/// `min-max` of the capacities installed in threads, or `-`.
pub fn in_use(cache: &CacheView) -> String {
    match (
        cache.sheaf_capacity_in_use_min,
        cache.sheaf_capacity_in_use_max,
    ) {
        (_, 0) => "-".to_owned(),
        (min, max) if min == max => min.to_string(),
        (min, max) => format!("{min}-{max}"),
    }
}

/// `1.5 KiB`.
pub fn bytes(value: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut scaled = value as f64;
    let mut unit = 0;
    while scaled >= 1024.0 && unit + 1 < UNITS.len() {
        scaled /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value} B")
    } else {
        format!("{scaled:.1} {}", UNITS[unit])
    }
}

/// `0-3,8,10-11`.
pub fn cpu_list(cpus: &[usize]) -> String {
    let Some((&first, rest)) = cpus.split_first() else {
        return "none".to_owned();
    };
    let mut parts = Vec::new();
    let (mut start, mut end) = (first, first);
    for &cpu in rest {
        if cpu == end + 1 {
            end = cpu;
        } else {
            parts.push(range(start, end));
            (start, end) = (cpu, cpu);
        }
    }
    parts.push(range(start, end));
    parts.join(",")
}

fn range(start: usize, end: usize) -> String {
    if start == end {
        start.to_string()
    } else {
        format!("{start}-{end}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_formatted() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(percent(share(1, 8)), "12.5%");
        assert_eq!(percent(share(1, 0)), "-");
        assert_eq!(tuning(None), "?");
        assert_eq!(cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(cpu_list(&[]), "none");
    }

    #[test]
    fn tables_align_their_columns() {
        let mut table = Table::new(&["CACHE", "N"]);
        table.row(vec!["size-8".to_owned(), "12345".to_owned()]);
        assert_eq!(table.render(), "CACHE       N\nsize-8  12345\n");
    }
}
