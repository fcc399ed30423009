//! Benchmarks on the lab: the throughput sweep behind `xdpool bench throughput` and
//! `make pktgen`; and [`steer`], the steering program's cost per frame under
//! `BPF_PROG_TEST_RUN` (`xdpool bench steer`, no lab needed).
//!
//! For each frame size and repetition the sweep sends a fixed count of frames from the
//! lab's side "a" with the live-frames generator, and counts what arrives at three
//! subjects in turn: the in-kernel XDP_DROP ceiling on side "b", `xdpool run` with the
//! `drop` action (rxdrop), and `xdpool run` with `l2fwd` (frames counted when they come
//! back to side "a"). [`sweep`] runs it, [`report`] summarizes (median and spread,
//! on-wire Gbit/s, fraction of the ceiling) and prints the Markdown table, [`plot`]
//! draws the SVG.
pub mod capture;
pub mod device_sweep;
pub mod gen_peer;
pub mod generator;
pub mod math;
pub mod plot;
pub mod report;
/// Ctrl-C handling (lives in the product; re-exported for the tools).
pub use xdpool::internal::signal;
pub mod steer;
pub mod sweep;

use std::path::{Path, PathBuf};

pub use report::{NapiMode, Placement, Sample, SizeRow, Subject, SweepReport};
pub use sweep::{run_sweep, Progress, SweepConfig};

/// Errors of the benchmarks.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The sweep's settings cannot work.
    #[error("invalid sweep settings: {0}")]
    Config(String),
    /// Building or removing the lab failed.
    #[error(transparent)]
    Lab(#[from] crate::lab::LabError),
    /// Namespace or device lookup failed.
    #[error(transparent)]
    Netns(#[from] crate::netns::NetnsError),
    /// The frame counter failed.
    #[error(transparent)]
    Count(#[from] crate::gen::count::CountError),
    /// The generator failed.
    #[error("generator: {0}")]
    Gen(#[from] crate::gen::GenError),
    /// The peer generator (`bench generator --peer`) failed.
    #[error("peer comparison: {0}")]
    Peer(String),
    /// The `xdpool run` child failed.
    #[error("`xdpool run` for {what} failed: {detail}; its log is {log}, and `xdpool run --config {config}` shows the same")]
    Child {
        /// Which measurement.
        what: String,
        /// What went wrong (with the tail of its log).
        detail: String,
        /// Its config file.
        config: PathBuf,
        /// Its log file.
        log: PathBuf,
    },
    /// Writing an output file failed.
    #[error("cannot write {path}: {source}; check that the directory is writable")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Drawing the plot failed.
    #[error("drawing the plot failed: {0}; this is a bug, please report it")]
    Plot(String),
}

/// Writes `bytes` to `path`, creating missing parent directories (`out/` for `make pktgen`).
pub fn write_creating_dirs(path: &Path, bytes: &[u8]) -> Result<(), BenchError> {
    let io = |source| BenchError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    std::fs::write(path, bytes).map_err(io)
}

/// Writes a device sweep's report as pretty JSON.
pub fn write_device_json(
    report: &device_sweep::DeviceSweepReport,
    path: &Path,
) -> Result<(), BenchError> {
    let text = serde_json::to_string_pretty(report).expect("the report serializes");
    write_creating_dirs(path, text.as_bytes())
}

/// Writes the report as pretty JSON.
pub fn write_json(report: &SweepReport, path: &Path) -> Result<(), BenchError> {
    let text = serde_json::to_string_pretty(report).expect("the report serializes");
    write_creating_dirs(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_create_their_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out/sub/t.json");
        let rep = report::tests::report(&report::tests::three_reps());
        write_json(&rep, &path).unwrap();
        let back: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(back["rows"].as_array().unwrap().len(), 2);
    }
}
