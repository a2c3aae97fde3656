//! `leave.lua`: members who left, or a deleted conversation.

use crate::Error;
use crate::keys::events_channel;
use crate::script::{Call, Lua, PartReply, Reply, Script, lua};
use crate::scripts::Members;
use crate::scripts::common::{merge_unanswered, unanswered};

/// The members' state of `conversation` goes, a tombstone stays.
pub struct Leave<'a> {
    pub conversation: &'a str,
    pub max_conversations: u32,
    pub max_kept: u32,
    pub require_loaded: bool,
    pub members: Members<'a>,
}

impl Script for Leave<'_> {
    /// How many members had it, and the members left to the SQL store.
    type Reply = (u32, Vec<String>);

    fn lua() -> &'static Lua {
        lua!("leave.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.arg("conversation", self.conversation);
        call.arg("max_conversations", self.max_conversations);
        call.arg("max_kept", self.max_kept);
        call.arg("idle_ttl", crate::IDLE_TTL);
        call.arg("require_loaded", self.require_loaded);
        call.arg("channel", events_channel(self.members.tenant));
        call.logs(self.members.tenant);
        self.members.encode(call, |_, _| {});
    }

    fn decode(&self, reply: &mut Reply) -> Result<Self::Reply, Error> {
        let removed = u32::try_from(reply.number()?).unwrap_or(u32::MAX);
        Ok((removed, unanswered(reply)?))
    }

    fn merge(&self, parts: Vec<PartReply>) -> Result<Self::Reply, Error> {
        merge_unanswered(self, parts)
    }
}
