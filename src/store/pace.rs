//! How fast the shared tier answers while a run waits on it, and when it is too slow to be
//! worth waiting for.
//!
//! Timeouts catch a server that does not answer; a server that answers slowly (a congested
//! link, a throttled bucket) passes every timeout and can still make a warm run many times
//! slower than computing locally (30 ms added per chunk: 9.0 s for the four pax archives'
//! analyses, against 0.46 s cold and 0.14 s from a fast bucket). So the time a run spends
//! waiting on the tier's reads and writes (wall time while at least one such call is under
//! way) is set against what those calls delivered: once it has waited [`MIN_WAIT`] and
//! received or sent less than [`MIN_BYTES_PER_S`] *and* answered fewer than
//! [`MIN_OBJECTS_PER_S`] objects per second of waiting (an absent object is an answer: a cold
//! run's batches are mostly that), the tier is left for the rest of the run, the calls under
//! way abandoned. A slow tier then costs a run about [`MIN_WAIT`] more than computing
//! locally; a tier that delivers many small objects quickly (latency-bound, not slow) or
//! large ones at a useful rate is kept.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Waiting shorter than this says nothing about the tier (connections, first answers).
pub const MIN_WAIT: Duration = Duration::from_secs(2);
/// Delivery rates under which waiting costs more than computing locally would.
pub const MIN_BYTES_PER_S: f64 = 4e6;
pub const MIN_OBJECTS_PER_S: f64 = 50.0;
/// How often a call under way checks the pace.
pub const CHECK_EVERY: Duration = Duration::from_millis(50);

#[derive(Default)]
struct Inner {
    /// Calls under way, and since when at least one has been.
    active: u32,
    since: Option<Instant>,
    /// Waiting done by calls that ended.
    waited: Duration,
    bytes: u64,
    objects: u64,
}

#[derive(Default)]
pub struct Pace(Mutex<Inner>);

/// A call under way, from [`Pace::begin`] to its drop.
pub struct Waiting<'a>(&'a Pace);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut p = (self.0).0.lock().unwrap();
        p.active -= 1;
        if p.active == 0
            && let Some(since) = p.since.take()
        {
            p.waited += since.elapsed();
        }
    }
}

impl Pace {
    pub fn begin(&self) -> Waiting<'_> {
        let mut p = self.0.lock().unwrap();
        if p.active == 0 {
            p.since = Some(Instant::now());
        }
        p.active += 1;
        Waiting(self)
    }

    /// An object of `bytes` received or sent (0: found absent).
    pub fn delivered(&self, bytes: usize) {
        let mut p = self.0.lock().unwrap();
        p.bytes += bytes as u64;
        p.objects += 1;
    }

    /// Why the tier is too slow to wait for, if it is: what it delivered in how long.
    pub fn too_slow(&self) -> Option<String> {
        let p = self.0.lock().unwrap();
        let waited = p.waited + p.since.map_or(Duration::ZERO, |s| s.elapsed());
        let secs = waited.as_secs_f64();
        let slow = waited >= MIN_WAIT
            && (p.bytes as f64) < MIN_BYTES_PER_S * secs
            && (p.objects as f64) < MIN_OBJECTS_PER_S * secs;
        slow.then(|| {
            format!(
                "too slow: {} objects, {:.1} MB in {secs:.1} s of waiting",
                p.objects,
                p.bytes as f64 / 1e6
            )
        })
    }
}

impl Pace {
    /// Run `f` on `rt` to its end, unless the tier turns out too slow meanwhile: then `f` is
    /// abandoned and why is returned.
    pub fn wait_on<F: std::future::Future>(
        self: &Arc<Self>,
        rt: &tokio::runtime::Runtime,
        f: F,
    ) -> Result<F::Output, String> {
        use futures::future::Either;
        let _waiting = self.begin();
        let pace = self.clone();
        let watch = async move {
            loop {
                tokio::time::sleep(CHECK_EVERY).await;
                if let Some(why) = pace.too_slow() {
                    return why;
                }
            }
        };
        match rt.block_on(futures::future::select(
            std::pin::pin!(f),
            std::pin::pin!(watch),
        )) {
            Either::Left((out, _)) => Ok(out),
            Either::Right((why, _)) => Err(why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_only_after_waiting_and_below_both_rates() {
        let pace = Pace::default();
        {
            let _w = pace.begin();
            let _w2 = pace.begin();
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(pace.too_slow().is_none(), "too early to tell");
        pace.0.lock().unwrap().waited = Duration::from_secs(2);
        assert!(pace.too_slow().unwrap().contains("0 objects"));
        // Many small objects: latency-bound, worth it.
        for _ in 0..150 {
            pace.delivered(100);
        }
        assert!(pace.too_slow().is_none());
        // Or few large ones at a useful rate.
        let pace = Pace::default();
        pace.0.lock().unwrap().waited = Duration::from_secs(2);
        pace.delivered(10_000_000);
        assert!(pace.too_slow().is_none());
        pace.0.lock().unwrap().waited = Duration::from_secs(3);
        assert!(pace.too_slow().is_some());
    }
}
