//! A connection's idle timeout that costs nothing per request.
//!
//! The plain way, moving one timer later at every request, costs a clock
//! read and a timer-wheel update per request: about 300 instructions of a
//! front-door SET's 13 500 (callgrind, `scripts/door-ir.sh`). Here a request
//! only sets a flag; the timer runs in whole periods and, when it fires,
//! starts another period if the connection was heard from during the last
//! one. So a silent connection is closed between one and two periods after
//! its last request, as Redis's own `timeout` is enforced by a periodic sweep
//! rather than to the millisecond.

use std::pin::Pin;
use std::time::Duration;
use tokio::time::{Instant, Sleep};

pub(crate) struct Idle {
    sleep: Pin<Box<Sleep>>,
    period: Duration,
    heard: bool,
}

impl Idle {
    pub(crate) fn new(period: Duration) -> Self {
        Idle { sleep: Box::pin(tokio::time::sleep(period)), period, heard: false }
    }

    /// The connection was heard from: it is not idle this period.
    pub(crate) fn heard(&mut self) {
        self.heard = true;
    }

    /// Completes once a whole period has passed without [`Idle::heard`].
    /// Cancel-safe: dropped and called again, it goes on where it was.
    pub(crate) async fn expired(&mut self) {
        loop {
            self.sleep.as_mut().await;
            if !std::mem::take(&mut self.heard) {
                return;
            }
            self.sleep.as_mut().reset(Instant::now() + self.period);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_connection_heard_from_stays_and_a_silent_one_goes_between_one_and_two_periods() {
        let period = Duration::from_millis(100);
        for gap_ms in [10, 60, 99] {
            let start = Instant::now();
            let mut idle = Idle::new(period);
            let mut last_heard = start;
            // Heard every `gap_ms` for a second: never expires.
            while start.elapsed() < Duration::from_secs(1) {
                idle.heard();
                last_heard = Instant::now();
                tokio::select! {
                    biased;
                    () = idle.expired() => panic!("expired at {:?} though heard every {gap_ms} ms", start.elapsed()),
                    () = tokio::time::sleep(Duration::from_millis(gap_ms)) => {}
                }
            }
            // Then silent: it expires one to two periods after it was last heard.
            idle.expired().await;
            let silent = last_heard.elapsed();
            assert!(period <= silent && silent <= 2 * period, "gap {gap_ms} ms: expired after {silent:?} of silence");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn never_heard_it_expires_after_one_period() {
        let start = Instant::now();
        let mut idle = Idle::new(Duration::from_millis(100));
        idle.expired().await;
        assert_eq!(start.elapsed(), Duration::from_millis(100));
    }
}
