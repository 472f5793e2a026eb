//! Failure notices at the top (`--ftco-notices`): a notice of a root's death holds the result
//! until the dead root's input comes, so that a notice overtaking its DATA cannot make the roots
//! count it differently.

use crate::time::Time;

use super::super::Collective;
use super::{Ftco, TIMER_NOTICE};

impl Ftco {
    /// A notice says `x`, a top rank (a root-set member) in this rank's view, died. It may
    /// have sent its DATA to the root set it saw just before, and a notice can overtake that
    /// DATA. The peer roots take it when it comes (a dead peer root's DATA is taken by every
    /// root alike), and those that replace `x` get its piece relayed by them; a root that
    /// fixed its result at once would leave `x` out while the others count it. So until this
    /// rank holds `x`'s input, its result waits one detection timeout, which the model makes
    /// longer than two messages' latency: DATA that `x` sent before the notice left, and a
    /// relay of it, come within that time. (Without notices the ACK timeouts give the margin.)
    pub(super) fn notice_hold(&mut self, now: Time, x: u32) {
        let waits = self.config.collective == Collective::Allreduce
            && self.result.is_none()
            && self.up.contains(&x)
            && self.view.at_top(x, &self.dead)
            && !self.pieces.cover().contains(x);
        if waits && self.notice_holds.len() < self.view.tree.size() as usize {
            let until = now.after(self.config.detect_timeout);
            self.notice_holds.push((x, until));
            self.timers.arm(TIMER_NOTICE, until);
        }
    }

    /// Whether a notice hold keeps the result open: a top rank reported dead whose input this
    /// rank does not hold yet, within its hold. Expired and satisfied holds are dropped.
    pub(super) fn held_by_notice(&mut self, now: Time) -> bool {
        let cover = self.pieces.cover();
        self.notice_holds
            .retain(|&(x, until)| now < until && !cover.contains(x));
        match self.notice_holds.iter().map(|&(_, until)| until).min() {
            Some(next) => {
                self.timers.arm(TIMER_NOTICE, next);
                true
            }
            None => {
                self.timers.disarm(TIMER_NOTICE);
                false
            }
        }
    }
}
