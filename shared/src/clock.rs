//! Time and randomness, passed in so tests control them. Library code never
//! reads the system clock or an RNG directly (clippy's `disallowed-methods`
//! enforces it); it asks the [`Clock`] and the [`IdSource`] it was given.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use chrono::{DateTime, TimeZone, Utc};

/// A source of the current time.
pub trait Clock: Send + Sync + 'static {
    /// Now, in UTC, at microsecond precision.
    fn now(&self) -> DateTime<Utc>;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)] // the one place that reads the wall clock
    fn now(&self) -> DateTime<Utc> {
        truncate_to_micros(Utc::now())
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        ManualClock(AtomicI64::new(start.timestamp_micros()))
    }

    /// Moves the clock forward by `micros`.
    pub fn advance_micros(&self, micros: i64) {
        self.0.fetch_add(micros, Ordering::SeqCst);
    }

    /// Sets the clock.
    pub fn set(&self, t: DateTime<Utc>) {
        self.0.store(t.timestamp_micros(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        micros_to_time(self.0.load(Ordering::SeqCst))
    }
}

/// Drops sub-microsecond precision, which ids and timelines do not keep.
pub fn truncate_to_micros(t: DateTime<Utc>) -> DateTime<Utc> {
    micros_to_time(t.timestamp_micros())
}

/// The time `micros` µs after the Unix epoch.
pub fn micros_to_time(micros: i64) -> DateTime<Utc> {
    Utc.timestamp_micros(micros)
        .single()
        .expect("every i64 of microseconds is a valid UTC time")
}

/// A source of unpredictable bytes for secrets such as bearer tokens.
pub trait IdSource: Send + Sync + 'static {
    /// Fills `buf` with random bytes.
    fn fill(&self, buf: &mut [u8]);
}

/// The operating system's CSPRNG.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsRandom;

impl IdSource for OsRandom {
    #[allow(clippy::disallowed_methods)] // the one place that reads the OS RNG
    fn fill(&self, buf: &mut [u8]) {
        getrandom::fill(buf).expect("the OS random source is available");
    }
}

/// A deterministic source for tests: a BLAKE3 stream of a seed and counter.
#[derive(Debug)]
pub struct SeededIds {
    seed: u64,
    counter: AtomicU64,
}

impl SeededIds {
    /// A source that yields the same bytes for the same seed.
    pub fn new(seed: u64) -> Self {
        SeededIds {
            seed,
            counter: AtomicU64::new(0),
        }
    }
}

impl IdSource for SeededIds {
    fn fill(&self, buf: &mut [u8]) {
        let n = self.counter.fetch_add(1, Ordering::SeqCst);
        let mut h = blake3::Hasher::new();
        h.update(&self.seed.to_le_bytes());
        h.update(&n.to_le_bytes());
        h.finalize_xof().fill(buf);
    }
}
