//! What a conversation counts: the one formula, shared by every answer built
//! in Rust (from the SQL truth) and mirrored by `counted` in `prelude.lua`
//! (a unit test runs both on the same states).

/// One conversation as one user sees it, reduced to what it counts by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Newest seq.
    pub last: u64,
    /// Read cursor.
    pub read: u64,
    /// Unread messages in (read, last] that mention the user (not recalled).
    pub mentions: u64,
    /// Recalled messages in (read, last].
    pub recalled: u64,
    /// Muted by the user.
    pub muted: bool,
    /// Marked unread by the user.
    pub marked_unread: bool,
}

/// What one listed conversation counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counted {
    /// Its unread number.
    pub unread: u64,
    /// What the badge total counts: nothing when muted; one for a mark
    /// without unread (Telegram's `unread_mark`).
    pub badge: u64,
    /// Its unread when muted (the badge's `muted`).
    pub muted: u64,
    /// Its unread mentions.
    pub mentions: u64,
}

impl Counts {
    /// unread = max(0, last − read − recalled); the badge counts it unless
    /// muted, and one for a mark without unread.
    pub fn counted(&self) -> Counted {
        let unread = self.last.saturating_sub(self.read).saturating_sub(self.recalled);
        let badge = match (self.muted, self.marked_unread && unread == 0) {
            (true, _) => 0,
            (false, true) => 1,
            (false, false) => unread,
        };
        Counted { unread, badge, muted: if self.muted { unread } else { 0 }, mentions: self.mentions }
    }
}

/// The list score of a conversation whose newest message is `seq` at `ts`:
/// same-millisecond messages keep their order by the low digits of seq.
pub fn score(ts: u64, seq: u64) -> u64 {
    ts * 1000 + seq % 1000
}

/// The time (ms) of a list score.
pub fn ts_of(score: u64) -> u64 {
    score / 1000
}

/// Flags as the scripts write them, in their order: m muted, p pinned, u
/// marked unread.
pub fn flags(muted: bool, pinned: bool, marked_unread: bool) -> String {
    [(muted, 'm'), (pinned, 'p'), (marked_unread, 'u')].iter().filter(|(on, _)| *on).map(|(_, c)| *c).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(last: u64, read: u64) -> Counts {
        Counts { last, read, ..Counts::default() }
    }

    #[test]
    fn recalls_and_mentions_count_between_the_cursor_and_the_last_message() {
        let mut c = Counts { recalled: 1, mentions: 1, ..counts(5, 2) };
        assert_eq!(c.counted(), Counted { unread: 2, badge: 2, muted: 0, mentions: 1 });
        c.muted = true;
        assert_eq!(c.counted(), Counted { unread: 2, badge: 0, muted: 2, mentions: 1 });
    }

    #[test]
    fn a_mark_counts_one_only_without_unread_and_unmuted() {
        let marked = Counts { marked_unread: true, ..counts(5, 5) };
        assert_eq!(marked.counted().badge, 1);
        assert_eq!(Counts { marked_unread: true, ..counts(5, 3) }.counted().badge, 2);
        assert_eq!(Counts { muted: true, ..marked }.counted().badge, 0);
        assert_eq!(flags(true, true, true), "mpu");
    }

    #[test]
    fn scores_order_same_millisecond_messages_by_seq() {
        assert!(score(1000, 8) > score(1000, 7));
        assert_eq!(ts_of(score(1_764_460_800_123, 17)), 1_764_460_800_123);
    }
}
