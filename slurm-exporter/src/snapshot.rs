//! The last complete snapshot, pre-rendered in both formats, each also gzip-compressed,
//! and swapped atomically.
//!
//! Scrapes take an `Arc` to the current snapshot and send its bytes; the collector builds
//! a new snapshot beside it and swaps the pointer. A scrape never waits for a collection.

use std::sync::{Arc, RwLock};
use std::time::{Instant, SystemTime};

use bytes::Bytes;

use crate::gzip::{self, Deflated, GzipBody};
use crate::render::Rendered;

/// One source's families (or the exporter's own), rendered and compressed once.
#[derive(Clone, Debug)]
pub struct Fragment {
    /// The families, rendered in both formats.
    pub text: Rendered,
    prometheus_gzip: Deflated,
    openmetrics_gzip: Deflated,
}

impl Fragment {
    /// Compresses a rendering.
    pub fn new(text: Rendered) -> Fragment {
        Fragment {
            prometheus_gzip: Deflated::new(text.prometheus.as_bytes(), gzip::LEVEL),
            openmetrics_gzip: Deflated::new(text.openmetrics.as_bytes(), gzip::LEVEL),
            text,
        }
    }
}

/// One complete set of metrics, ready to send.
#[derive(Debug)]
pub struct Snapshot {
    /// Prometheus text format 0.0.4.
    pub prometheus: Bytes,
    /// OpenMetrics 1.0.0 without the final `# EOF`.
    pub openmetrics: Bytes,
    /// `prometheus`, gzip-compressed up to the trailer.
    pub prometheus_gzip: GzipBody,
    /// `openmetrics`, gzip-compressed up to the trailer.
    pub openmetrics_gzip: GzipBody,
    /// When it was built (for the snapshot-age metric).
    pub built: Instant,
    /// The same moment, in wall-clock time.
    pub built_at: SystemTime,
}

impl Snapshot {
    /// Lays fragments end to end (only copies: every fragment is compressed already).
    pub fn assemble<'a>(fragments: impl Iterator<Item = &'a Fragment> + Clone) -> Snapshot {
        let size: usize = fragments.clone().map(|f| f.text.prometheus.len()).sum();
        let mut prometheus = String::with_capacity(size);
        let mut openmetrics = String::with_capacity(size + size / 8);
        let mut prometheus_gzip = GzipBody::default();
        let mut openmetrics_gzip = GzipBody::default();
        for f in fragments {
            prometheus.push_str(&f.text.prometheus);
            openmetrics.push_str(&f.text.openmetrics);
            prometheus_gzip.push(&f.prometheus_gzip);
            openmetrics_gzip.push(&f.openmetrics_gzip);
        }
        Snapshot {
            prometheus: Bytes::from(prometheus),
            openmetrics: Bytes::from(openmetrics),
            prometheus_gzip,
            openmetrics_gzip,
            built: Instant::now(),
            built_at: SystemTime::now(),
        }
    }
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
