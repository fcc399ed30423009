//! The sweep's results: per-run samples, their per-size summary, and the Markdown
//! table printed from it. The table and the JSON come from the same [`SweepReport`],
//! so they agree by construction; a test checks it anyway.
use serde::{Deserialize, Serialize};

use super::math::{self, Spread};

/// What one measurement measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Subject {
    /// XDP_DROP in the kernel on the receiving veth (`xdpool_count`: counts UDP
    /// frames, drops everything).
    Ceiling,
    /// `xdpool run` with the `drop` action: frames reach the worker and are recycled.
    Rxdrop,
    /// `xdpool run` with the `l2fwd` action: MACs swapped, sent back, counted on the
    /// generator's side.
    L2fwd,
}

impl Subject {
    /// All subjects, in the order a repetition measures them.
    pub const ALL: [Subject; 3] = [Subject::Ceiling, Subject::Rxdrop, Subject::L2fwd];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Subject::Ceiling => "ceiling",
            Subject::Rxdrop => "rxdrop",
            Subject::L2fwd => "l2fwd",
        }
    }
}

/// One measurement: one generator run against one subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// What was measured.
    pub subject: Subject,
    /// Frame size without FCS.
    pub size: usize,
    /// Repetition, from 1.
    pub rep: u32,
    /// Frames the generator handed to the kernel.
    pub sent: u64,
    /// Frames counted where the subject delivers them (the ceiling's drop counter,
    /// the worker's received frames, or frames back on the generator's veth).
    pub received: u64,
    /// How long the generator sent, seconds.
    pub gen_elapsed_s: f64,
    /// The generator's own rate (`sent / gen_elapsed_s`), Mpps.
    pub gen_mpps: f64,
    /// Delivered rate (`received / gen_elapsed_s`), Mpps.
    pub mpps: f64,
    /// For xdpool runs: whether its frame accounting held at exit.
    pub accounting_ok: Option<bool>,
}

/// One subject at one size, over the repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Delivered Mpps: median, range and spread.
    pub mpps: Spread,
    /// On-wire Gbit/s at the median rate.
    pub gbps: f64,
    /// Median Mpps over the ceiling's median Mpps (1.0 for the ceiling itself).
    pub fraction_of_ceiling: Option<f64>,
    /// All frames received over all frames sent, over the repetitions.
    pub delivered_fraction: f64,
    /// The runs behind it.
    pub samples: Vec<Sample>,
}

/// Everything measured at one frame size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeRow {
    /// Frame size without FCS, bytes.
    pub size: usize,
    /// Bits per frame on the wire (see [`math::on_wire_bits`]).
    pub on_wire_bits: u64,
    /// The generator's own rate (frames handed to the kernel) in the ceiling runs,
    /// Mpps: what the sender can do when the receiver costs least. In the xdpool runs
    /// it is lower where receive work shares its core (see each sample's `gen_mpps`).
    pub generator_mpps: Spread,
    /// In-kernel XDP_DROP.
    pub ceiling: Point,
    /// xdpool rxdrop.
    pub rxdrop: Point,
    /// xdpool l2fwd.
    pub l2fwd: Point,
}

/// How NAPI ran on the receiving veth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NapiMode {
    /// In softirq context on the CPU that scheduled it.
    Softirq,
    /// In a kernel thread (`/sys/class/net/DEV/threaded` = 1).
    Threaded,
}

/// Where everything ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// Core the generator thread was pinned to.
    pub generator_core: usize,
    /// Generator engine and batch.
    pub generator_engine: String,
    /// NAPI mode of the veth pair.
    pub napi_mode: NapiMode,
    /// Where the receiving NAPI ran, in words.
    pub napi_core: String,
    /// Core of xdpool's worker.
    pub worker_core: usize,
    /// The worker's wait mode.
    pub worker_mode: String,
}

/// A whole sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    /// `uname -r` of the machine.
    pub kernel: String,
    /// Frames the generator sends per measurement.
    pub frames_per_run: u64,
    /// Repetitions asked for per size and subject.
    pub reps: u32,
    /// Time limit of one generator run, seconds.
    pub time_limit_s: f64,
    /// What "size" means.
    pub size_note: String,
    /// How Gbit/s is computed.
    pub gbps_note: String,
    /// CPU placement.
    pub placement: Placement,
    /// One row per size, in sweep order.
    pub rows: Vec<SizeRow>,
    /// True when Ctrl-C stopped the sweep early (rows hold what was complete).
    pub interrupted: bool,
}

/// What "size" means in every report.
pub const SIZE_NOTE: &str = "frame size in bytes without the 4-byte FCS, as handed to the device";
/// How Gbit/s is computed in every report.
pub const GBPS_NOTE: &str =
    "Gbit/s on the wire: Mpps x (size + 4 B FCS + 20 B preamble, SFD and inter-frame gap) x 8 bits";

fn point(samples: Vec<Sample>, size: usize, ceiling_median: Option<f64>) -> Option<Point> {
    let mpps = math::spread(&samples.iter().map(|s| s.mpps).collect::<Vec<_>>())?;
    let sent: u64 = samples.iter().map(|s| s.sent).sum();
    let received: u64 = samples.iter().map(|s| s.received).sum();
    Some(Point {
        gbps: math::on_wire_gbps(mpps.median * 1e6, size),
        fraction_of_ceiling: math::fraction(mpps.median, ceiling_median.unwrap_or(mpps.median)),
        delivered_fraction: math::fraction(received as f64, sent as f64).unwrap_or(0.0),
        mpps,
        samples,
    })
}

/// Groups samples into rows, one per size in first-seen order. A size without at
/// least one sample of every subject (an interrupted sweep) gives no row.
pub fn build_rows(samples: &[Sample]) -> Vec<SizeRow> {
    let mut sizes: Vec<usize> = Vec::new();
    for s in samples {
        if !sizes.contains(&s.size) {
            sizes.push(s.size);
        }
    }
    let of = |size: usize, subject: Subject| -> Vec<Sample> {
        samples
            .iter()
            .filter(|s| s.size == size && s.subject == subject)
            .cloned()
            .collect()
    };
    sizes
        .into_iter()
        .filter_map(|size| {
            let ceiling = point(of(size, Subject::Ceiling), size, None)?;
            let generator_mpps = math::spread(
                &ceiling
                    .samples
                    .iter()
                    .map(|s| s.gen_mpps)
                    .collect::<Vec<_>>(),
            )?;
            let cm = Some(ceiling.mpps.median);
            let rxdrop = point(of(size, Subject::Rxdrop), size, cm)?;
            let l2fwd = point(of(size, Subject::L2fwd), size, cm)?;
            Some(SizeRow {
                size,
                on_wire_bits: math::on_wire_bits(size),
                generator_mpps,
                ceiling,
                rxdrop,
                l2fwd,
            })
        })
        .collect()
}

/// Column headers of [`SweepReport::table`].
pub const TABLE_HEADER: [&str; 11] = [
    "size (B)",
    "generator Mpps (ceiling runs)",
    "ceiling Mpps",
    "ceiling Gbit/s",
    "rxdrop Mpps",
    "rxdrop Gbit/s",
    "rxdrop / ceiling",
    "l2fwd Mpps",
    "l2fwd Gbit/s",
    "l2fwd / ceiling",
    "delivered rxdrop / l2fwd",
];

fn mpps_cell(s: &Spread) -> String {
    format!("{:.3} ±{:.1}%", s.median, s.spread_pct)
}

fn pct(f: Option<f64>) -> String {
    f.map_or_else(|| "n/a".to_string(), |f| format!("{:.1}%", f * 100.0))
}

impl SweepReport {
    /// The Markdown table, followed by the notes a reader needs (what the numbers mean
    /// and where everything ran).
    pub fn table(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!("| {} |\n", TABLE_HEADER.join(" | ")));
        out.push_str(&format!("|{}\n", "---:|".repeat(TABLE_HEADER.len())));
        for r in &self.rows {
            let cells = [
                r.size.to_string(),
                mpps_cell(&r.generator_mpps),
                mpps_cell(&r.ceiling.mpps),
                format!("{:.3}", r.ceiling.gbps),
                mpps_cell(&r.rxdrop.mpps),
                format!("{:.3}", r.rxdrop.gbps),
                pct(r.rxdrop.fraction_of_ceiling),
                mpps_cell(&r.l2fwd.mpps),
                format!("{:.3}", r.l2fwd.gbps),
                pct(r.l2fwd.fraction_of_ceiling),
                format!(
                    "{} / {}",
                    pct(Some(r.rxdrop.delivered_fraction)),
                    pct(Some(r.l2fwd.delivered_fraction))
                ),
            ];
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        let p = &self.placement;
        out.push('\n');
        out.push_str(&format!(
            "Mpps: median of {} repetition(s) of {} frames each (time limit {:.0} s); ±: spread, (max - min) / median. \
             Delivered rate = frames counted at the subject / generator send time. \
             Ceiling: in-kernel XDP_DROP on the receiving veth. l2fwd: frames counted back on the generator's veth. \
             Generator: frames it handed to the kernel / send time, in the ceiling runs. \
             Delivered: frames received / frames sent, all repetitions.\n",
            self.reps, self.frames_per_run, self.time_limit_s
        ));
        out.push_str(&format!("Size: {}. {}.\n", self.size_note, self.gbps_note));
        out.push_str(&format!(
            "Placement: generator core {} ({}); NAPI {} ({}); xdpool worker core {} ({}). Kernel {}.{}\n",
            p.generator_core,
            p.generator_engine,
            match p.napi_mode {
                NapiMode::Softirq => "softirq",
                NapiMode::Threaded => "threaded",
            },
            p.napi_core,
            p.worker_core,
            p.worker_mode,
            self.kernel,
            if self.interrupted { " INTERRUPTED: only the sizes completed are shown." } else { "" }
        ));
        out
    }
}

/// Checks that a table printed by [`SweepReport::table`] says what the JSON of the same
/// report says: the header, one row per JSON row with the same size, and every number
/// equal to the table's precision. Returns the rows compared, or what differs.
pub fn table_matches_json(table: &str, json: &serde_json::Value) -> Result<usize, String> {
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .ok_or("no header line")?
        .trim_matches('|')
        .split('|')
        .map(str::trim)
        .collect();
    if header != TABLE_HEADER {
        return Err(format!("header {header:?}"));
    }
    if !lines.next().is_some_and(|l| l.starts_with("|---:")) {
        return Err("no separator line".into());
    }
    let rows = json["rows"].as_array().ok_or("no rows in the JSON")?;
    let table_rows: Vec<&str> = lines.take_while(|l| l.starts_with('|')).collect();
    if table_rows.len() != rows.len() {
        return Err(format!(
            "{} table rows, {} JSON rows",
            table_rows.len(),
            rows.len()
        ));
    }
    for (line, row) in table_rows.iter().zip(rows) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() != TABLE_HEADER.len() {
            return Err(format!("{} cells in {line}", cells.len()));
        }
        let size: u64 = cells[0]
            .parse()
            .map_err(|e| format!("size {:?}: {e}", cells[0]))?;
        if Some(size) != row["size"].as_u64() {
            return Err(format!("size {size} against {}", row["size"]));
        }
        let f = |p: &str| {
            row.pointer(p)
                .and_then(|v| v.as_f64())
                .ok_or_else(|| format!("{p} missing in {row}"))
        };
        let want = [
            f("/generator_mpps/median")?,
            f("/ceiling/mpps/median")?,
            f("/ceiling/gbps")?,
            f("/rxdrop/mpps/median")?,
            f("/rxdrop/gbps")?,
            f("/rxdrop/fraction_of_ceiling")? * 100.0,
            f("/l2fwd/mpps/median")?,
            f("/l2fwd/gbps")?,
            f("/l2fwd/fraction_of_ceiling")? * 100.0,
            f("/rxdrop/delivered_fraction")? * 100.0,
        ];
        for (i, (cell, want)) in cells[1..].iter().zip(want).enumerate() {
            let got: f64 = cell
                .split([' ', '%'])
                .next()
                .unwrap_or("")
                .parse()
                .map_err(|e| format!("cell {cell:?}: {e}"))?;
            if (got - want).abs() > 0.051 {
                return Err(format!(
                    "size {size}, column {}: table {got}, JSON {want}",
                    TABLE_HEADER[i + 1]
                ));
            }
        }
    }
    Ok(rows.len())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample(
        subject: Subject,
        size: usize,
        rep: u32,
        received: u64,
        secs: f64,
    ) -> Sample {
        let sent = 1_000_000;
        Sample {
            subject,
            size,
            rep,
            sent,
            received,
            gen_elapsed_s: secs,
            gen_mpps: sent as f64 / secs / 1e6,
            mpps: received as f64 / secs / 1e6,
            accounting_ok: (subject != Subject::Ceiling).then_some(true),
        }
    }

    pub(crate) fn report(samples: &[Sample]) -> SweepReport {
        SweepReport {
            kernel: "6.18.0-test".into(),
            frames_per_run: 1_000_000,
            reps: 3,
            time_limit_s: 10.0,
            size_note: SIZE_NOTE.into(),
            gbps_note: GBPS_NOTE.into(),
            placement: Placement {
                generator_core: 0,
                generator_engine: "live frames".into(),
                napi_mode: NapiMode::Softirq,
                napi_core: "on core 0".into(),
                worker_core: 1,
                worker_mode: "poll".into(),
            },
            rows: build_rows(samples),
            interrupted: false,
        }
    }

    pub(crate) fn three_reps() -> Vec<Sample> {
        let mut v = Vec::new();
        for (size, secs) in [(64usize, 1.0f64), (1500, 2.0)] {
            for rep in 1..=3 {
                v.push(sample(Subject::Ceiling, size, rep, 1_000_000, secs));
                v.push(sample(
                    Subject::Rxdrop,
                    size,
                    rep,
                    400_000 + 100_000 * rep as u64,
                    secs,
                ));
                v.push(sample(Subject::L2fwd, size, rep, 250_000, secs));
            }
        }
        v
    }

    #[test]
    fn rows_summarize_reps_against_the_ceiling() {
        let rows = build_rows(&three_reps());
        assert_eq!(
            rows.iter().map(|r| r.size).collect::<Vec<_>>(),
            vec![64, 1500]
        );
        let r = &rows[0];
        assert_eq!(r.ceiling.mpps.median, 1.0);
        assert_eq!(r.ceiling.fraction_of_ceiling, Some(1.0));
        // rxdrop reps: 0.5, 0.6, 0.7 Mpps.
        assert!((r.rxdrop.mpps.median - 0.6).abs() < 1e-12);
        assert!((r.rxdrop.mpps.spread_pct - 0.2 / 0.6 * 100.0).abs() < 1e-9);
        assert!((r.rxdrop.fraction_of_ceiling.unwrap() - 0.6).abs() < 1e-12);
        assert!((r.rxdrop.delivered_fraction - 0.6).abs() < 1e-12);
        assert!((r.rxdrop.gbps - 0.6e6 * 88.0 * 8.0 / 1e9).abs() < 1e-12);
        assert_eq!(r.l2fwd.fraction_of_ceiling, Some(0.25));
        assert_eq!(r.generator_mpps.median, 1.0);
        assert_eq!(r.rxdrop.samples.len(), 3);
        // 1500 B runs took 2 s: half the rate.
        assert_eq!(rows[1].ceiling.mpps.median, 0.5);
        assert!((rows[1].ceiling.gbps - 0.5e6 * 1524.0 * 8.0 / 1e9).abs() < 1e-12);
    }

    #[test]
    fn incomplete_sizes_give_no_row() {
        let mut v = three_reps();
        v.push(sample(Subject::Ceiling, 256, 1, 10, 1.0));
        v.push(sample(Subject::Rxdrop, 256, 1, 10, 1.0));
        let rows = build_rows(&v);
        assert_eq!(rows.len(), 2, "256 has no l2fwd sample");
    }

    #[test]
    fn table_and_json_agree() {
        let rep = report(&three_reps());
        let table = rep.table();
        let json: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&rep).unwrap()).unwrap();
        assert_eq!(table_matches_json(&table, &json), Ok(2));
        let tampered = table.replacen("| 64 |", "| 65 |", 1);
        assert_ne!(tampered, table);
        assert!(
            table_matches_json(&tampered, &json).is_err(),
            "a changed size is caught"
        );
        assert!(table.contains("20 B preamble"), "{table}");
        assert!(
            table.contains("generator core 0") && table.contains("worker core 1"),
            "{table}"
        );
        let back: SweepReport = serde_json::from_value(json).unwrap();
        assert_eq!(
            back.table(),
            table,
            "the JSON holds everything the table shows"
        );
    }
}
