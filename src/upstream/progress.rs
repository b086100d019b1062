//! Progress discipline for one forwarded request: values must rise, bursts are coalesced to
//! a minimum interval (the latest value is held, never lost), and nothing follows the end.

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

/// The step between progress values the gateway makes up (from task status messages).
pub const MADE_UP_STEP: f64 = 1e-6;

#[derive(Debug, Default)]
pub struct ProgressGate {
    last_value: Option<f64>,
    /// The `total` last announced, if any.
    total: Option<f64>,
    last_sent: Option<Instant>,
    held: Option<Message>,
    flush_armed: bool,
}

impl ProgressGate {
    /// Judges `msg` (a `notifications/progress`). A held message is kept inside the gate.
    pub fn offer(&mut self, msg: Message, min_interval: Duration, now: Instant) -> (Verdict, Option<Message>) {
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
        match self.last_sent {
            Some(sent) if !min_interval.is_zero() && now < sent + min_interval => {
                self.held = Some(msg);
                let armed = self.flush_armed;
                self.flush_armed = true;
                (Verdict::Hold { at: sent + min_interval, armed }, None)
            }
            _ => {
                self.last_sent = Some(now);
                self.held = None;
                (Verdict::Send, Some(msg))
            }
        }
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
    pub fn flush(&mut self, now: Instant) -> Option<Message> {
        self.flush_armed = false;
        let held = self.held.take()?;
        self.last_sent = Some(now);
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
        assert_eq!(g.offer(p(1.0), Duration::ZERO, t).0, Verdict::Send);
        assert_eq!(g.offer(p(1.0), Duration::ZERO, t).0, Verdict::Drop);
        assert_eq!(g.offer(p(0.5), Duration::ZERO, t).0, Verdict::Drop);
        assert_eq!(g.offer(p(2.0), Duration::ZERO, t).0, Verdict::Send);
    }

    #[test]
    fn made_up_values_rise_by_a_tiny_step_and_stay_within_the_total() {
        let mut g = ProgressGate::default();
        assert_eq!(g.next_value(), Some(MADE_UP_STEP));
        let t = Instant::now();
        g.offer(note(json!({"progressToken": 1, "progress": 2.5, "total": 3})), Duration::ZERO, t);
        assert_eq!(g.next_value(), Some(2.5 + MADE_UP_STEP));
        g.offer(note(json!({"progressToken": 1, "progress": 3, "total": 3})), Duration::ZERO, t);
        assert_eq!(g.next_value(), None);
    }

    #[test]
    fn bursts_coalesce_to_the_latest_value() {
        let mut g = ProgressGate::default();
        let t = Instant::now();
        let iv = Duration::from_millis(50);
        assert_eq!(g.offer(p(1.0), iv, t).0, Verdict::Send);
        assert_eq!(g.offer(p(2.0), iv, t).0, Verdict::Hold { at: t + iv, armed: false });
        assert_eq!(g.offer(p(3.0), iv, t).0, Verdict::Hold { at: t + iv, armed: true });
        let out = g.flush(t + iv).unwrap();
        assert_eq!(out.value()["params"]["progress"], 3.0);
        assert!(g.flush(t + iv).is_none());
        assert_eq!(g.offer(p(4.0), iv, t + iv).0, Verdict::Hold { at: t + iv * 2, armed: false });
        assert_eq!(
            g.finish().unwrap().value()["params"]["progress"],
            4.0,
            "the latest value gets out before the result"
        );
    }
}
