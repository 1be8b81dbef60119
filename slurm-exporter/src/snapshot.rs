//! The last complete snapshot, pre-rendered in both formats and swapped atomically.
//!
//! Scrapes take an `Arc` to the current snapshot and send its bytes; the collector builds
//! a new snapshot beside it and swaps the pointer. A scrape never waits for a collection.

use std::sync::{Arc, RwLock};
use std::time::{Instant, SystemTime};

use bytes::Bytes;

/// One complete set of metrics, ready to send.
#[derive(Debug)]
pub struct Snapshot {
    /// Prometheus text format 0.0.4.
    pub prometheus: Bytes,
    /// OpenMetrics 1.0.0 without the final `# EOF`.
    pub openmetrics: Bytes,
    /// When it was built (for the snapshot-age metric).
    pub built: Instant,
    /// The same moment, in wall-clock time.
    pub built_at: SystemTime,
}

/// Holds the current snapshot, if any.
#[derive(Debug, Default)]
pub struct SnapshotCell {
    current: RwLock<Option<Arc<Snapshot>>>,
}

impl SnapshotCell {
    /// The current snapshot (`None` until the first one is complete).
    pub fn get(&self) -> Option<Arc<Snapshot>> {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Replaces the current snapshot.
    pub fn set(&self, snapshot: Snapshot) {
        let new = Some(Arc::new(snapshot));
        // The old snapshot is dropped after the lock is released.
        let _old = std::mem::replace(
            &mut *self
                .current
                .write()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
            new,
        );
    }
}
