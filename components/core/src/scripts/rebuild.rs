//! `rebuild.lua`: users' state rewritten from the truth where it differs.

use std::time::Duration;

use crate::Error;
use crate::config::Limits;
use crate::keys::{UserKeys, events_channel};
use crate::script::{Call, Lua, PartReply, Reply, Script, decode_parts, lua};
use crate::sql::TruthRow;

/// One user's truth, read after their state `version`.
pub struct TruthUser<'a> {
    pub user: &'a str,
    pub version: &'a str,
    /// The truth holds more than `rows` (cursors beyond what is kept).
    pub partial: bool,
    pub rows: Vec<&'a TruthRow>,
}

/// Rewrites each user whose version did not move since their truth was read.
pub struct Rebuild<'a> {
    pub tenant: &'a str,
    pub users: Vec<TruthUser<'a>>,
    /// Whether a user with nothing in the truth and no keys gets an empty,
    /// loaded state (expiring when idle): yes when they asked themselves (so
    /// that their next read is Redis's), no when someone else named them.
    pub load_empty: bool,
    /// Whether a user whose state and truth differ is rewritten at once:
    /// always but in a reconcile before its last attempt. Otherwise the
    /// user is left alone (not done), as when its version moved, and the
    /// reconcile reads the truth again a moment later: mostly a change is
    /// on its way (a message, a recall or a mention stored and not yet in
    /// Redis, or a large conversation's message that came after the truth
    /// was read), and a rewrite would report the race as drift.
    pub settle: bool,
    /// What each user keeps, as their large conversations catch up.
    pub limits: Limits,
}

/// What the rebuild did for one user.
pub struct Rebuilt {
    pub user: String,
    /// False when the user's state moved since the truth was read (or, short
    /// of `settle`, the two differ).
    pub done: bool,
    /// What the user could see differed.
    pub drifted: bool,
    /// The largest difference of one conversation's unread number.
    pub max_drift: u64,
    /// (conversation or `badge:<field>`, in Redis, in truth)
    pub drifts: Vec<(String, u64, u64)>,
}

impl Script for Rebuild<'_> {
    type Reply = Vec<Rebuilt>;
    const DEADLINE: Duration = Duration::from_secs(10);

    fn lua() -> &'static Lua {
        lua!("rebuild.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.arg("idle_ttl", crate::IDLE_TTL);
        call.arg("channel", events_channel(self.tenant));
        call.arg("load_empty", self.load_empty);
        call.arg("settle", self.settle);
        call.arg("max_conversations", self.limits.max_conversations);
        call.arg("max_kept", self.limits.max_kept);
        call.logs(self.tenant);
        call.each(&self.users, |item, truth| {
            UserKeys::new(self.tenant, truth.user).encode(item);
            item.arg("user", truth.user);
            item.arg("version", truth.version);
            item.arg("partial", truth.partial);
            item.arg("rows", truth.rows.iter().map(|row| row.line()).collect::<Vec<_>>().join("\n"));
        });
    }

    fn decode(&self, reply: &mut Reply) -> Result<Vec<Rebuilt>, Error> {
        let mut users = Vec::new();
        while !reply.is_empty() {
            let user = reply.text()?;
            let done = reply.text()? == "ok";
            let drifted = reply.flag()?;
            let max_drift = reply.number()?;
            let n = reply.number()?;
            let drifts =
                (0..n).map(|_| Ok((reply.text()?, reply.number()?, reply.number()?))).collect::<Result<_, Error>>()?;
            users.push(Rebuilt { user, done, drifted, max_drift, drifts });
        }
        Ok(users)
    }

    fn merge(&self, parts: Vec<PartReply>) -> Result<Self::Reply, Error> {
        Ok(decode_parts(self, parts)?.into_iter().flatten().collect())
    }
}

impl TruthRow {
    /// The row as `rebuild.lua` parses it: NUL-separated fields, no newline
    /// (identifiers and compact JSON carry no control characters); the last
    /// is `1` for a large conversation (the user becomes a member), else
    /// empty.
    pub fn line(&self) -> String {
        let seqs = |list: &[u64]| list.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        let score = if self.last_seq > 0 { self.score().to_string() } else { String::new() };
        [
            self.conversation.as_str(),
            if self.listed { "l" } else { "k" },
            &score,
            &self.last_seq.to_string(),
            &self.read_seq.to_string(),
            &crate::state::flags(self.muted, self.pinned, self.marked_unread),
            &self.category,
            &seqs(&self.mentions),
            &seqs(&self.recalled),
            if self.large { "1" } else { "" },
        ]
        .join("\0")
    }
}
