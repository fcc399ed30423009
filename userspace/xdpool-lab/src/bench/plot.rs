//! The sweep's plot: Mpps and on-wire Gbit/s against frame size, one line per
//! subject, the ceiling drawn dashed, min..max of the repetitions as whiskers. SVG.
use std::path::Path;

use plotters::prelude::*;

use super::report::{Point, SizeRow, SweepReport};
use super::BenchError;

const CEILING: RGBColor = RGBColor(0x22, 0x22, 0x22);
const GENERATOR: RGBColor = RGBColor(0x99, 0x99, 0x99);
const RXDROP: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const L2FWD: RGBColor = RGBColor(0xd6, 0x27, 0x28);

struct Series {
    label: &'static str,
    color: RGBColor,
    dashed: bool,
    /// (size, median, min, max)
    points: Vec<(f64, f64, f64, f64)>,
}

fn series(rows: &[SizeRow], gbps: bool) -> Vec<Series> {
    let scale = |r: &SizeRow| {
        if gbps {
            r.on_wire_bits as f64 / 1e3
        } else {
            1.0
        }
    };
    let of = |pick: &dyn Fn(&SizeRow) -> &Point| -> Vec<(f64, f64, f64, f64)> {
        rows.iter()
            .map(|r| {
                let m = &pick(r).mpps;
                let k = scale(r);
                (r.size as f64, m.median * k, m.min * k, m.max * k)
            })
            .collect()
    };
    let gen = rows
        .iter()
        .map(|r| {
            let m = &r.generator_mpps;
            let k = scale(r);
            (r.size as f64, m.median * k, m.min * k, m.max * k)
        })
        .collect();
    vec![
        Series {
            label: "ceiling (XDP_DROP)",
            color: CEILING,
            dashed: true,
            points: of(&|r| &r.ceiling),
        },
        Series {
            label: "generator (ceiling runs)",
            color: GENERATOR,
            dashed: false,
            points: gen,
        },
        Series {
            label: "xdpool rxdrop",
            color: RXDROP,
            dashed: false,
            points: of(&|r| &r.rxdrop),
        },
        Series {
            label: "xdpool l2fwd",
            color: L2FWD,
            dashed: false,
            points: of(&|r| &r.l2fwd),
        },
    ]
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    rows: &[SizeRow],
    gbps: bool,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let all = series(rows, gbps);
    let x_max = rows.iter().map(|r| r.size).max().unwrap_or(1500) as f64;
    let y_max = all
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.3))
        .fold(0.0f64, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.15 } else { 1.0 };
    let (title, y_desc) = if gbps {
        ("Gbit/s on the wire", "Gbit/s (incl. FCS, preamble, gap)")
    } else {
        ("Mpps", "Mpps")
    };
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..x_max * 1.05, 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_desc("frame size (B, without FCS)")
        .y_desc(y_desc)
        .y_label_formatter(&|v| format!("{v:.2}"))
        .x_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    for s in all {
        let style = ShapeStyle::from(&s.color).stroke_width(2);
        let line: Vec<(f64, f64)> = s.points.iter().map(|p| (p.0, p.1)).collect();
        let anno = if s.dashed {
            chart.draw_series(DashedLineSeries::new(line.clone(), 8, 5, style))?
        } else {
            chart.draw_series(LineSeries::new(line.clone(), style))?
        };
        let color = s.color;
        anno.label(s.label).legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
        });
        chart.draw_series(
            line.iter()
                .map(|&(x, y)| Circle::new((x, y), 3, s.color.filled())),
        )?;
        chart.draw_series(s.points.iter().map(|&(x, _, lo, hi)| {
            PathElement::new(vec![(x, lo), (x, hi)], s.color.stroke_width(1))
        }))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Renders the plot as SVG text.
pub fn render_svg(report: &SweepReport) -> Result<String, BenchError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1200, 480)).into_drawing_area();
        let err = |e: &dyn std::fmt::Display| BenchError::Plot(e.to_string());
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let title = format!(
            "xdpool throughput on veth (generator core {}, worker core {}, kernel {})",
            report.placement.generator_core, report.placement.worker_core, report.kernel
        );
        let root = root
            .titled(&title, ("sans-serif", 18))
            .map_err(|e| err(&e))?;
        let (left, right) = root.split_horizontally(600);
        draw_panel(&left, &report.rows, false).map_err(|e| err(&e))?;
        draw_panel(&right, &report.rows, true).map_err(|e| err(&e))?;
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}

/// Writes the plot to `path` (SVG), creating its directory when missing.
pub fn write_svg(report: &SweepReport, path: &Path) -> Result<(), BenchError> {
    let svg = render_svg(report)?;
    super::write_creating_dirs(path, svg.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::super::report::tests::{report, three_reps};
    use super::*;

    #[test]
    fn plot_is_an_svg_with_every_series() {
        let svg = render_svg(&report(&three_reps())).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        assert!(svg.trim_end().ends_with("</svg>"));
        for label in [
            "ceiling (XDP_DROP)",
            "xdpool rxdrop",
            "xdpool l2fwd",
            "generator (ceiling runs)",
            "Gbit/s on the wire",
        ] {
            assert!(svg.contains(label), "missing {label}");
        }
        // Two panels, four lines each (polylines), dashed ceiling as many segments.
        assert!(svg.matches("<polyline").count() >= 8);
    }

    #[test]
    fn empty_report_still_plots() {
        let svg = render_svg(&report(&[])).unwrap();
        assert!(svg.contains("</svg>"));
    }
}
