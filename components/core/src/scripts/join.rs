//! `join.lua`: members who joined after a seq.

use crate::Error;
use crate::keys::{ConversationKeys, events_channel};
use crate::script::{Call, Lua, Reply, Script, lua};
use crate::scripts::Members;

/// The members joined `conversation` after message `seq`.
pub struct Join<'a> {
    pub conversation: &'a str,
    pub seq: u64,
    pub max_conversations: u32,
    pub max_kept: u32,
    pub members: Members<'a>,
}

impl Script for Join<'_> {
    /// How many members' state changed.
    type Reply = u32;

    fn lua() -> &'static Lua {
        lua!("join.lua")
    }

    fn encode(&self, call: &mut Call) {
        ConversationKeys::new(self.members.tenant, self.conversation).encode_only(call, &["head"]);
        call.arg("conversation", self.conversation);
        call.arg("seq", self.seq);
        call.arg("max_conversations", self.max_conversations);
        call.arg("max_kept", self.max_kept);
        call.arg("idle_ttl", crate::IDLE_TTL);
        call.arg("channel", events_channel(self.members.tenant));
        self.members.encode(call, |_, _| {});
    }

    fn decode(&self, reply: &mut Reply) -> Result<Self::Reply, Error> {
        Ok(u32::try_from(reply.number()?).unwrap_or(u32::MAX))
    }
}
