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
    /// Owner caches' lengths as each owner last published them (must equal
    /// `cached`; `PoolOwner::accounting` publishes its own first, a worker once per
    /// batch, teardown and `reclaim_kernel` always).
    pub cached_listed: u64,
    /// Global list entries that are duplicates or whose frame the owner map puts
    /// elsewhere (must be 0).
    pub free_list_bad: u64,
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
        if self.free_list_bad != 0 {
            return Err(format!(
                "{} global list entries are duplicates or not free in the owner map: {self:?}",
                self.free_list_bad
            ));
        }
        if self.cached != self.cached_listed {
            return Err(format!(
                "owner map says {} in owner caches but the caches hold {} \
                 (an owner that changed its cache since its last publish_stats reads stale): {self:?}",
                self.cached, self.cached_listed
            ));
        }
        Ok(())
    }
}

/// What one pool's sockets hold in the kernel, from the xsk rings' own positions
/// (not from the owner map): `fill` = fill entries submitted - RX descriptors taken
/// (rejected ones included), `tx` = TX descriptors submitted - completions taken.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct KernelHeld {
    /// Frames handed to the kernel through fill rings and not yet back through RX.
    pub fill: u64,
    /// TX descriptors not yet completed.
    pub tx: u64,
}

/// One pool's owner map compared with second sources (`PoolOwner::audit`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PoolAudit {
    /// Frames the owner map says are in this pool's cache.
    pub cached_map: u64,
    /// Entries in the cache.
    pub cache_len: u64,
    /// Cache entries naming a frame twice, or a frame the map says is elsewhere or
    /// of another generation.
    pub cache_entries_bad: u64,
    /// Frames the owner map says this pool put in fill rings.
    pub fill_map: u64,
    /// The same from the rings' positions.
    pub fill_rings: u64,
    /// TX descriptors by the owner map: frames in TX plus split-chunk TX references.
    pub tx_map: u64,
    /// The same from the rings' positions.
    pub tx_rings: u64,
}

impl PoolAudit {
    /// Every pair agrees, and no cache entry is bad.
    pub fn check(&self) -> Result<(), String> {
        if self.cached_map != self.cache_len || self.cache_entries_bad != 0 {
            return Err(format!(
                "owner cache: map says {} cached, the cache holds {} entries, {} of them bad: {self:?}",
                self.cached_map, self.cache_len, self.cache_entries_bad
            ));
        }
        if self.fill_map != self.fill_rings {
            return Err(format!(
                "owner map says {} frames in the fill rings but the rings' positions say the kernel holds {}: {self:?}",
                self.fill_map, self.fill_rings
            ));
        }
        if self.tx_map != self.tx_rings {
            return Err(format!(
                "owner map says {} TX descriptors out but the rings' positions say {}: {self:?}",
                self.tx_map, self.tx_rings
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
            cached_listed: 1,
            free_list_bad: 0,
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
            ..ok.clone()
        };
        assert!(ring.check().unwrap_err().contains("return rings"));
        let cache = Accounting {
            cached_listed: 2,
            ..ok.clone()
        };
        assert!(cache.check().unwrap_err().contains("owner caches"));
        let bad = Accounting {
            free_list_bad: 1,
            ..ok
        };
        assert!(bad.check().unwrap_err().contains("duplicates"));
    }
}
