//! Progress discipline for one forwarded request: values must rise, and past a sustained rate
//! (one per minimum interval, after a burst allowance) notifications are coalesced (the latest
//! value is held, never lost); nothing follows the end.

use crate::jsonrpc::Message;
use std::time::Duration;
use tokio::time::Instant;

/// What to do with a progress notification that just arrived.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Forward it now.
    Send,
    /// Held as the latest value; forward it at `at` (a flush is already due if `armed`).
    Hold { at: Instant, armed: bool },
    /// Drop it: its value does not rise above the last one.
    Drop,
}

/// How fast one token's progress is forwarded: a burst of `burst` at once, then one per
/// `interval` (a token bucket); what comes faster is coalesced to the latest value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pace {
    pub interval: Duration,
    pub burst: u32,
}

impl Pace {
    /// Everything forwarded as it comes.
    pub const UNPACED: Pace = Pace { interval: Duration::ZERO, burst: 1 };
}

/// The step between progress values the gateway makes up (from task status messages).
pub const MADE_UP_STEP: f64 = 1e-6;

#[derive(Debug, Default)]
pub struct ProgressGate {
    last_value: Option<f64>,
    /// The `total` last announced, if any.
    total: Option<f64>,
    /// Notifications that may go out at once: one more per interval, at most the burst.
    allowance: f64,
    /// When `allowance` was last brought up to date (`None`: nothing sent yet).
    counted: Option<Instant>,
    held: Option<Message>,
    flush_armed: bool,
}

impl ProgressGate {
    /// Judges `msg` (a `notifications/progress`). A held message is kept inside the gate.
    pub fn offer(&mut self, msg: Message, pace: Pace, now: Instant) -> (Verdict, Option<Message>) {
        let (Some(value), total) = msg.progress_values() else {
            return (Verdict::Drop, None);
        };
        if self.last_value.is_some_and(|last| value <= last) {
            return (Verdict::Drop, None);
        }
        self.last_value = Some(value);
        if let Some(t) = total {
            self.total = Some(t);
        }
        if pace.interval.is_zero() {
            self.held = None;
            return (Verdict::Send, Some(msg));
        }
        self.count(pace, now);
        if self.allowance >= 1.0 {
            self.allowance -= 1.0;
            // A newer value than the one held: the held one is coalesced into it.
            self.held = None;
            return (Verdict::Send, Some(msg));
        }
        self.held = Some(msg);
        let armed = self.flush_armed;
        self.flush_armed = true;
        (Verdict::Hold { at: now + pace.interval.mul_f64(1.0 - self.allowance), armed }, None)
    }

    /// Brings the allowance up to `now`: full before the first notification, then one more
    /// per interval, at most the burst.
    fn count(&mut self, pace: Pace, now: Instant) {
        let burst = f64::from(pace.burst.max(1));
        self.allowance = match self.counted {
            None => burst,
            Some(at) => {
                let gained = now.saturating_duration_since(at).as_secs_f64() / pace.interval.as_secs_f64();
                (self.allowance + gained).min(burst)
            }
        };
        self.counted = Some(now);
    }

    /// A value for progress the gateway makes up: just above every value so far, so that
    /// it stays below anything real an upstream may still report (which then passes
    /// unchanged), and not past the total (`None` when there is no room left below it).
    pub fn next_value(&self) -> Option<f64> {
        let next = self.last_value.unwrap_or(0.0) + MADE_UP_STEP;
        match self.total {
            Some(total) if next > total => None,
            _ => Some(next),
        }
    }

    /// The flush timer fired: the held message, if one is still waiting.
    pub fn flush(&mut self, pace: Pace, now: Instant) -> Option<Message> {
        self.flush_armed = false;
        let held = self.held.take()?;
        if !pace.interval.is_zero() {
            self.count(pace, now);
            self.allowance = (self.allowance - 1.0).max(0.0);
        }
        Some(held)
    }

    /// The request ended: what is still held goes out before the result.
    pub fn finish(&mut self) -> Option<Message> {
        self.held.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(v: f64) -> Message {
        note(json!({"progressToken": 1, "progress": v}))
    }

    fn note(params: serde_json::Value) -> Message {
        Message::made(json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}))
    }

    #[test]
    fn non_increasing_values_are_dropped() {
        let mut g = ProgressGate::default();
        let t = Instant::now();
        assert_eq!(g.offer(p(1.0), Pace::UNPACED, t).0, Verdict::Send);
        assert_eq!(g.offer(p(1.0), Pace::UNPACED, t).0, Verdict::Drop);
        assert_eq!(g.offer(p(0.5), Pace::UNPACED, t).0, Verdict::Drop);
        assert_eq!(g.offer(p(2.0), Pace::UNPACED, t).0, Verdict::Send);
    }

    #[test]
    fn made_up_values_rise_by_a_tiny_step_and_stay_within_the_total() {
        let mut g = ProgressGate::default();
        assert_eq!(g.next_value(), Some(MADE_UP_STEP));
        let t = Instant::now();
        g.offer(note(json!({"progressToken": 1, "progress": 2.5, "total": 3})), Pace::UNPACED, t);
        assert_eq!(g.next_value(), Some(2.5 + MADE_UP_STEP));
        g.offer(note(json!({"progressToken": 1, "progress": 3, "total": 3})), Pace::UNPACED, t);
        assert_eq!(g.next_value(), None);
    }

    #[test]
    fn bursts_coalesce_to_the_latest_value() {
        let mut g = ProgressGate::default();
        let t = Instant::now();
        let iv = Duration::from_millis(50);
        let pace = Pace { interval: iv, burst: 1 };
        assert_eq!(g.offer(p(1.0), pace, t).0, Verdict::Send);
        assert_eq!(g.offer(p(2.0), pace, t).0, Verdict::Hold { at: t + iv, armed: false });
        assert_eq!(g.offer(p(3.0), pace, t).0, Verdict::Hold { at: t + iv, armed: true });
        let out = g.flush(pace, t + iv).unwrap();
        assert_eq!(out.value()["params"]["progress"], 3.0);
        assert!(g.flush(pace, t + iv).is_none());
        assert_eq!(g.offer(p(4.0), pace, t + iv).0, Verdict::Hold { at: t + iv * 2, armed: false });
        assert_eq!(
            g.finish().unwrap().value()["params"]["progress"],
            4.0,
            "the latest value gets out before the result"
        );
    }

    #[test]
    fn a_burst_within_the_allowance_passes_whole_and_a_sustained_flood_is_paced() {
        let mut g = ProgressGate::default();
        let t = Instant::now();
        let iv = Duration::from_millis(10);
        let pace = Pace { interval: iv, burst: 3 };
        // Three at once, as a server that reports three steps back to back sends them.
        for v in 1..=3 {
            assert_eq!(g.offer(p(f64::from(v)), pace, t).0, Verdict::Send, "value {v}");
        }
        // The fourth waits for the allowance to grow back by one.
        assert_eq!(g.offer(p(4.0), pace, t).0, Verdict::Hold { at: t + iv, armed: false });
        assert_eq!(g.flush(pace, t + iv).unwrap().value()["params"]["progress"], 4.0);
        // After a quiet spell the whole burst is allowed again, and no more.
        let later = t + iv * 100;
        for v in 5..=7 {
            assert_eq!(g.offer(p(f64::from(v)), pace, later).0, Verdict::Send, "value {v}");
        }
        assert!(matches!(g.offer(p(8.0), pace, later).0, Verdict::Hold { .. }));
        // A value that arrives once the allowance is back replaces the held one.
        assert_eq!(g.offer(p(9.0), pace, later + iv).0, Verdict::Send);
        assert!(g.flush(pace, later + iv).is_none(), "the held 8 was coalesced into 9");
    }
}
