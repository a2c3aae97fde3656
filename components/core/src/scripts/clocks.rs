//! `move_clocks.lua`: the clocks of large conversations on Redis Cluster,
//! where the scripts that move a log cannot reach its clock (another slot),
//! so the cluster client moves it for them (and reads the clocks with plain
//! `HMGET`s: `read_clocks` in cluster.rs).

use crate::Error;
use crate::keys::{clock, events_channel};
use crate::script::{Call, Lua, PartReply, Reply, Script, decode_parts, lua};

/// A large conversation's log moved (or went).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClockMove {
    pub conversation: String,
    /// The log's counter now; none: the conversation was deleted.
    pub counter: Option<u64>,
    /// The log is new (its counter started over).
    pub fresh: bool,
    /// The seq of the message or recall to publish the conversation's event
    /// for, after its clock: when this call logged it (`logged`), or else
    /// when the clock was behind its log (the call's first try logged it
    /// and failed before the clock moved; a replay finds the clock there
    /// and announces nothing).
    pub announce: Option<u64>,
    /// This call logged the message or recall it announces.
    pub logged: bool,
    /// Another seq to announce when the clock was behind its log: the
    /// head's message, when this call did not log its own (a held-back copy
    /// of an earlier message, or a late one): the clock may be behind for
    /// it. Under such a race an event may come twice, never not at all.
    pub also: Option<u64>,
}

/// Moves the clocks of `tenant`'s large conversations to their logs.
pub struct MoveClocks<'a> {
    pub tenant: &'a str,
    pub moves: &'a [ClockMove],
}

impl MoveClocks<'_> {
    /// After a script moved (or dropped) the logs of `moves`: on Redis
    /// Cluster their clocks move now, then their events go out; one Redis
    /// moved them in that script's step. Nothing to do for no moves.
    pub async fn after(tenant: &str, moves: &[ClockMove]) -> Result<(), Error> {
        if moves.is_empty() || !crate::redis::is_cluster().await? {
            return Ok(());
        }
        crate::redis::run(&MoveClocks { tenant, moves }).await.map(|_| ())
    }
}

impl Script for MoveClocks<'_> {
    /// How many clocks changed.
    type Reply = u64;

    fn lua() -> &'static Lua {
        lua!("move_clocks.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.arg("channel", events_channel(self.tenant));
        call.each(self.moves, |item, moved| {
            item.key("clock", clock(self.tenant, &moved.conversation));
            item.arg("conversation", moved.conversation.as_str());
            item.arg("counter", moved.counter.map(|n| n.to_string()).unwrap_or_default());
            item.arg("fresh", moved.fresh);
            item.arg("announce", moved.announce.map(|n| n.to_string()).unwrap_or_default());
            item.arg("logged", moved.logged);
            item.arg("also", moved.also.map(|n| n.to_string()).unwrap_or_default());
        });
    }

    fn decode(&self, reply: &mut Reply) -> Result<u64, Error> {
        reply.number()
    }

    fn merge(&self, parts: Vec<PartReply>) -> Result<u64, Error> {
        Ok(decode_parts(self, parts)?.into_iter().sum())
    }
}
