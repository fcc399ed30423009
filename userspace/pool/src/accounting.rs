//! The accounting invariant: every frame is in exactly one place.

use serde::Serialize;

/// Where the region's frames are, from the owner map, with the lengths of the lists
/// that hold them for a cross-check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Accounting {
    /// On global free lists (owner map).
    pub free: u64,
    /// In owner caches.
    pub cached: u64,
    /// In return rings.
    pub ring: u64,
    /// In fill rings.
    pub fill: u64,
    /// In TX rings.
    pub tx: u64,
    /// Held by the application.
    pub application: u64,
    /// Frames in the region.
    pub total: u64,
    /// Entries on the global free lists (must equal `free`).
    pub free_listed: u64,
    /// Entries in the live pools' return rings (must equal `ring`).
    pub ring_listed: u64,
}

impl Accounting {
    /// The invariant `free + cached + ring + fill + tx + application == total`, and the
    /// owner map agreeing with the lists. Meaningful when no thread is moving frames.
    pub fn check(&self) -> Result<(), String> {
        let sum = self.free + self.cached + self.ring + self.fill + self.tx + self.application;
        if sum != self.total {
            return Err(format!(
                "frames lost or duplicated: {self:?} sums to {sum}, not {}",
                self.total
            ));
        }
        if self.free != self.free_listed {
            return Err(format!(
                "owner map says {} free but the global lists hold {}: {self:?}",
                self.free, self.free_listed
            ));
        }
        if self.ring != self.ring_listed {
            return Err(format!(
                "owner map says {} in return rings but the rings hold {}: {self:?}",
                self.ring, self.ring_listed
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_catches_loss_and_disagreement() {
        let ok = Accounting {
            free: 2,
            cached: 1,
            ring: 1,
            fill: 1,
            tx: 1,
            application: 2,
            total: 8,
            free_listed: 2,
            ring_listed: 1,
        };
        ok.check().unwrap();
        let lost = Accounting {
            application: 1,
            ..ok.clone()
        };
        assert!(lost.check().unwrap_err().contains("lost"));
        let listed = Accounting {
            free_listed: 3,
            ..ok.clone()
        };
        assert!(listed.check().unwrap_err().contains("global lists"));
        let ring = Accounting {
            ring_listed: 0,
            ..ok
        };
        assert!(ring.check().unwrap_err().contains("return rings"));
    }
}
