//! The arithmetic of a throughput report: on-wire bit rates and repetition statistics.
//! Pure functions, tested without root.
use serde::{Deserialize, Serialize};

/// Ethernet frame check sequence, which the frame sizes of a sweep leave out.
pub const FCS_BYTES: usize = 4;
/// Preamble + start-of-frame delimiter (8) and the minimum inter-frame gap (12).
pub const PREAMBLE_AND_GAP_BYTES: usize = 20;

/// Bits one frame of `frame_size` bytes (without FCS) occupies on the wire:
/// `(size + 4 FCS + 20 preamble/SFD/gap) * 8`.
pub fn on_wire_bits(frame_size: usize) -> u64 {
    ((frame_size + FCS_BYTES + PREAMBLE_AND_GAP_BYTES) * 8) as u64
}

/// On-wire rate in Gbit/s of `pps` frames per second of `frame_size` bytes.
pub fn on_wire_gbps(pps: f64, frame_size: usize) -> f64 {
    pps * on_wire_bits(frame_size) as f64 / 1e9
}

/// Median, range and spread of a few repetitions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Median (the mean of the middle two for an even count).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// `(max - min) / median` in percent (0 when the median is 0).
    pub spread_pct: f64,
    /// Number of values.
    pub n: usize,
}

/// Summarizes `values`; `None` when there are none or one is not finite.
pub fn spread(values: &[f64]) -> Option<Spread> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    let (min, max) = (v[0], v[n - 1]);
    let spread_pct = if median > 0.0 {
        (max - min) / median * 100.0
    } else {
        0.0
    };
    Some(Spread {
        median,
        min,
        max,
        spread_pct,
        n,
    })
}

/// `part / whole`, or `None` when `whole` is not positive.
pub fn fraction(part: f64, whole: f64) -> Option<f64> {
    (whole > 0.0).then(|| part / whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_wire_counts_fcs_preamble_and_gap() {
        // 64-byte frames without FCS: 88 bytes on the wire.
        assert_eq!(on_wire_bits(64), 88 * 8);
        assert_eq!(on_wire_bits(1500), 1524 * 8);
        // 10 GbE line rate for 60+4 byte (minimum) frames is 14.88 Mpps.
        let line_rate_pps = 10e9 / on_wire_bits(60) as f64;
        assert!(
            (line_rate_pps - 14_880_952.38).abs() < 1.0,
            "{line_rate_pps}"
        );
        assert!((on_wire_gbps(line_rate_pps, 60) - 10.0).abs() < 1e-9);
        assert!((on_wire_gbps(1e6, 1000) - 8.192).abs() < 1e-12);
    }

    #[test]
    fn median_and_spread() {
        let s = spread(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert!((s.spread_pct - 100.0).abs() < 1e-12);
        let s = spread(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert!((s.spread_pct - 120.0).abs() < 1e-12);
        let one = spread(&[0.79]).unwrap();
        assert_eq!((one.median, one.spread_pct, one.n), (0.79, 0.0, 1));
        assert_eq!(spread(&[0.0, 0.0]).unwrap().spread_pct, 0.0);
        assert!(spread(&[]).is_none());
        assert!(spread(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn fraction_needs_a_positive_whole() {
        assert_eq!(fraction(1.0, 4.0), Some(0.25));
        assert_eq!(fraction(1.0, 0.0), None);
    }
}
