//! Whether a cache-only Redis lost its data. Without a SQL store, Redis holds
//! the only copy of every read cursor, so a Redis that restarted without
//! persistence (or was flushed) answers zero for everyone: answers must say
//! so. Each new connection reads the data set's record (`dataset.lua`) with
//! the one this instance saw before; a record gone or replaced is a loss,
//! kept in the record for every instance until an operator clears it
//! (`HDEL un:v2:dataset lost`).
//!
//! A loss is seen by an instance that served before it; Spin keeps an
//! instance for up to 128 requests, so a busy service sees it at once, and
//! every answer says so from then on (docs/operations.md). An instance reads
//! the record again every [`RECHECK`], beside a call, so that what another
//! instance saw (or the operator cleared) reaches it without a reconnect.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use crate::bindings::unread::core::types::Source;
use crate::scripts::{Dataset, DatasetRecord};

thread_local! {
    /// The data set this instance saw last.
    static SEEN: RefCell<String> = const { RefCell::new(String::new()) };
    /// When the data set was lost (ms), if it was.
    static LOST_AT: Cell<Option<u64>> = const { Cell::new(None) };
    /// When this instance last read the record; never, with a SQL store.
    static CHECKED_AT: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// How often an instance reads the record again (besides on every new
/// connection): what another instance saw reaches it within this.
const RECHECK: Duration = Duration::from_secs(60);

/// Whether this (cache-only) instance should read the record again now;
/// if so, the next [`RECHECK`] starts.
pub fn due() -> bool {
    let due = CHECKED_AT.get().is_some_and(|at| at.elapsed() >= RECHECK);
    if due {
        CHECKED_AT.set(Some(Instant::now()));
    }
    due
}

/// The check of the record against the one this instance saw last.
pub fn check() -> Dataset {
    Dataset { remembered: SEEN.with_borrow(String::clone) }
}

/// Notes the record a new connection read.
pub fn saw(record: DatasetRecord) {
    if let Some(at) = record.lost_at
        && LOST_AT.get().is_none()
    {
        eprintln!(
            "unread: error: Redis lost its data (the data set's record is gone or replaced; lost at {at} ms): \
             cache-only has no copy to rebuild from, so every number restarts from nothing. Run Redis with \
             persistence (appendonly yes); once the loss is handled, clear it with HDEL un:v2:dataset lost"
        );
    }
    SEEN.with_borrow_mut(|seen| *seen = record.id);
    LOST_AT.set(record.lost_at);
    CHECKED_AT.set(Some(Instant::now()));
}

/// The source of an answer Redis gave.
pub fn redis_source() -> Source {
    if LOST_AT.get().is_some() { Source::RedisDataLost } else { Source::Redis }
}
