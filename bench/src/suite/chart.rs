//! The suite's chart: one grouped bar chart, throughput of each allocator
//! relative to the system allocator, per workload (SVG, plotters).

use std::path::Path;

use plotters::prelude::*;
use sheafalloc_bench::peers::{self, Peer};

use super::jobs::Job;
use super::table::ratios_vs_system;

/// Bar colours, in `peers::ALL` order (sheafalloc first).
const COLOURS: [RGBColor; 5] = [
    RGBColor(214, 39, 40),
    RGBColor(127, 127, 127),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// Writes the chart of the plain throughput jobs to `path`.
pub fn write(path: &Path, jobs: &[Job]) -> Result<(), String> {
    let groups = ratios_vs_system(jobs);
    if groups.is_empty() {
        return Err("no throughput workload ran".into());
    }
    draw(path, &groups).map_err(|e| e.to_string())
}

fn draw(path: &Path, groups: &[(&str, Vec<f64>)]) -> Result<(), Box<dyn std::error::Error>> {
    let finite = || {
        groups
            .iter()
            .flat_map(|(_, ratios)| ratios.iter().copied())
            .filter(|r| r.is_finite() && *r > 0.0)
    };
    // Log scale: a 30x ratio and a 0.9x one both stay readable.
    let top = finite().fold(1.0f64, f64::max) * 1.5;
    let bottom = finite().fold(1.0f64, f64::min).min(0.5) / 1.5;
    let width = 160 * groups.len() as u32 + 120;
    let root = SVGBackend::new(path, (width.max(700), 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Throughput relative to the system allocator (median; higher is better; log scale)",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..groups.len() as f64, (bottom..top).log_scale())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("× system")
        .draw()?;
    let bar = 0.8 / peers::ALL.len() as f64;
    for (p, peer) in peers::ALL.into_iter().enumerate() {
        let colour = COLOURS[p];
        let bars = groups.iter().enumerate().filter_map(|(g, (_, ratios))| {
            let ratio = ratios[p];
            ratio.is_finite().then(|| {
                let left = g as f64 + 0.1 + p as f64 * bar;
                Rectangle::new([(left, bottom), (left + bar * 0.9, ratio)], colour.filled())
            })
        });
        chart
            .draw_series(bars)?
            .label(legend_name(peer))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
    }
    // The system allocator's level.
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(0.0, 1.0), (groups.len() as f64, 1.0)],
        BLACK.stroke_width(1),
    )))?;
    for (g, (name, _)) in groups.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(g as f64 + 0.5, bottom));
        root.draw(&Text::new(
            name.to_string(),
            (x - 4 * name.len() as i32, y + 12),
            ("sans-serif", 14),
        ))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

fn legend_name(peer: Peer) -> &'static str {
    peer.name()
}
