//! P9's timeline as files: the rows as a CSV, and an SVG of four panels over time (memory,
//! health latency, actions, notifications and agent chunks) with the restart marked; and the
//! least-squares growth of server memory at the end of the run.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use plotters::prelude::*;

use super::record::Row;

const HEADER: &str = "elapsed_s,server_rss_kib,runner_rss_kib,health_p50_ms,health_p99_ms,health_probes,health_failures,creates_per_s,moves_per_s,searches_per_s,prompts_per_s,notifications_per_s,agent_chunks_per_s,errors_per_s,clients_connected";

pub(super) fn write_csv(path: &Path, rows: &[Row]) -> Result<()> {
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?,
    );
    writeln!(out, "{HEADER}")?;
    for r in rows {
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.elapsed_s,
            r.server_rss_kib,
            r.runner_rss_kib,
            r.health_p50_ms,
            r.health_p99_ms,
            r.health_probes,
            r.health_failures,
            r.creates_per_s,
            r.moves_per_s,
            r.searches_per_s,
            r.prompts_per_s,
            r.notifications_per_s,
            r.agent_chunks_per_s,
            r.errors_per_s,
            r.clients_connected
        )?;
    }
    out.flush()?;
    Ok(())
}

/// Server RSS growth over the rows from `from_s` on: the least-squares line's slope times
/// the stretch's length, in KiB; and the mean RSS there.
pub(super) fn rss_growth(rows: &[Row], from_s: f64) -> (f64, f64) {
    let points: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| r.elapsed_s >= from_s && r.server_rss_kib > 0)
        .map(|r| (r.elapsed_s, r.server_rss_kib as f64))
        .collect();
    if points.len() < 2 {
        return (0.0, points.first().map_or(0.0, |p| p.1));
    }
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let span = points[points.len() - 1].0 - points[0].0;
    (slope * span, mean_y)
}

/// One line of a panel: its name, colour and value per row.
type Series<'a> = (&'a str, RGBColor, Box<dyn Fn(&Row) -> f64 + 'a>);

pub(super) fn write_svg(path: &Path, rows: &[Row], title: &str, restart_s: f64) -> Result<()> {
    let root = SVGBackend::new(path, (1100, 1400)).into_drawing_area();
    root.fill(&WHITE)?;
    let (head, body) = root.split_vertically(40);
    head.titled(title, ("sans-serif", 22))?;
    let panels = body.split_evenly((4, 1));
    let mib = |kib: u64| kib as f64 / 1024.0;
    let specs: Vec<(&str, Vec<Series<'_>>)> = vec![
        (
            "memory (MiB, VmRSS)",
            vec![
                ("server", RED, Box::new(move |r: &Row| mib(r.server_rss_kib))),
                ("runner", BLUE, Box::new(move |r: &Row| mib(r.runner_rss_kib))),
            ],
        ),
        (
            "GET /api/v1/health latency in the tick (ms; the restart's tick is cut at the top)",
            vec![
                ("p50", GREEN, Box::new(|r: &Row| r.health_p50_ms)),
                ("p99", RED, Box::new(|r: &Row| r.health_p99_ms)),
            ],
        ),
        (
            "answered requests per second",
            vec![
                ("task.create", BLUE, Box::new(|r: &Row| r.creates_per_s)),
                ("task.move", GREEN, Box::new(|r: &Row| r.moves_per_s)),
                ("search", MAGENTA, Box::new(|r: &Row| r.searches_per_s)),
                ("message.add", BLACK, Box::new(|r: &Row| r.prompts_per_s)),
                ("failed", RED, Box::new(|r: &Row| r.errors_per_s)),
            ],
        ),
        (
            "told to the clients per second",
            vec![
                ("notifications", BLUE, Box::new(|r: &Row| r.notifications_per_s)),
                ("agent chunks", GREEN, Box::new(|r: &Row| r.agent_chunks_per_s)),
            ],
        ),
    ];
    let x_max = rows.last().map_or(1.0, |r| r.elapsed_s).max(1.0);
    let tick = match rows {
        [first, second, ..] => second.elapsed_s - first.elapsed_s,
        _ => 1.0,
    };
    for (i, (panel, (caption, series))) in panels.iter().zip(specs).enumerate() {
        let (memory, health) = (i == 0, i == 1);
        // The health panel's scale leaves out the tick of the restart (its probes waited for
        // the new server), whose line goes off the top; room above the lines for the legend.
        let y_max = rows
            .iter()
            .filter(|r| !(health && (r.elapsed_s - restart_s).abs() <= tick * 1.5))
            .flat_map(|r| series.iter().map(move |(_, _, value)| value(r)))
            .fold(0.0f64, f64::max)
            .max(1e-3)
            * (1.15 + 0.1 * (series.len() + 1) as f64);
        let mut chart = ChartBuilder::on(panel)
            .caption(caption, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
        chart.configure_mesh().x_desc("elapsed (s)").light_line_style(WHITE).draw()?;
        chart
            .draw_series(LineSeries::new([(restart_s, 0.0), (restart_s, y_max)], BLACK.mix(0.3)))?
            .label("kill -9, restart")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.mix(0.3)));
        for (name, colour, value) in series {
            // A memory of 0 is a tick without the process (killed): no point there.
            // A value above the scale (the restart's health tick) is drawn at its top.
            let points = rows
                .iter()
                .map(|r| (r.elapsed_s, value(r)))
                .filter(|(_, v)| !(memory && *v == 0.0))
                .map(|(x, v)| (x, v.min(y_max)));
            chart
                .draw_series(LineSeries::new(points, colour))?
                .label(name)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], colour));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }
    root.present().with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(elapsed_s: f64, server_rss_kib: u64) -> Row {
        Row {
            elapsed_s,
            server_rss_kib,
            runner_rss_kib: 0,
            health_p50_ms: 0.0,
            health_p99_ms: 0.0,
            health_probes: 0,
            health_failures: 0,
            creates_per_s: 0.0,
            moves_per_s: 0.0,
            searches_per_s: 0.0,
            prompts_per_s: 0.0,
            notifications_per_s: 0.0,
            agent_chunks_per_s: 0.0,
            errors_per_s: 0.0,
            clients_connected: 0,
        }
    }

    #[test]
    fn rss_growth_is_the_fitted_slope_over_the_stretch() {
        // 1 KiB/s from 100 s to 200 s, with noise around the line; the rows before are left out.
        let mut rows = vec![row(0.0, 1), row(50.0, 90_000)];
        rows.extend((0..=10).map(|i| {
            let t = 100.0 + 10.0 * f64::from(i);
            let noise = if i % 2 == 0 { 300 } else { 0 };
            row(t, 50_000 + (t as u64 - 100) + noise)
        }));
        let (growth, mean) = rss_growth(&rows, 100.0);
        assert!((growth - 100.0).abs() < 40.0, "growth {growth}");
        assert!((mean - 50_200.0).abs() < 100.0, "mean {mean}");
        let flat: Vec<Row> = (0..10).map(|i| row(f64::from(i), 40_000)).collect();
        assert_eq!(rss_growth(&flat, 0.0).0, 0.0);
    }

    #[test]
    fn the_timeline_is_written_as_csv_and_svg() {
        let dir = tempfile::tempdir().unwrap();
        let rows: Vec<Row> = (0..20).map(|i| row(f64::from(i), 30_000 + i as u64 * 10)).collect();
        write_csv(&dir.path().join("t.csv"), &rows).unwrap();
        let csv = std::fs::read_to_string(dir.path().join("t.csv")).unwrap();
        assert_eq!(csv.lines().count(), 21);
        assert!(csv.starts_with("elapsed_s,server_rss_kib,"));
        write_svg(&dir.path().join("t.svg"), &rows, "test", 10.0).unwrap();
        let svg = std::fs::read_to_string(dir.path().join("t.svg")).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("kill -9, restart") && svg.contains("memory (MiB, VmRSS)"));
    }
}
