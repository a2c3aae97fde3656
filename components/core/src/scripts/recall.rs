//! `recall.lua`: a recalled message, for every listed member.

use crate::Error;
use crate::keys::{ConversationKeys, events_channel};
use crate::script::{Call, Lua, PartReply, Reply, Script, lua};
use crate::scripts::Members;
use crate::scripts::common::{merge_unanswered, unanswered};

/// Message `seq` of `conversation` was recalled; `preview` (may be empty)
/// replaces it where it is the last message.
pub struct Recall<'a> {
    pub conversation: &'a str,
    pub seq: u64,
    pub preview: &'a str,
    pub max_conversations: u32,
    pub max_kept: u32,
    pub require_loaded: bool,
    pub members: Members<'a>,
}

impl Script for Recall<'_> {
    /// How many members' unread dropped, and the members left to the SQL store.
    type Reply = (u32, Vec<String>);

    fn lua() -> &'static Lua {
        lua!("recall.lua")
    }

    fn encode(&self, call: &mut Call) {
        ConversationKeys::new(self.members.tenant, self.conversation).encode(call);
        call.arg("conversation", self.conversation);
        call.arg("seq", self.seq);
        call.arg("preview", self.preview);
        call.arg("max_conversations", self.max_conversations);
        call.arg("max_kept", self.max_kept);
        call.arg("idle_ttl", crate::IDLE_TTL);
        call.arg("require_loaded", self.require_loaded);
        call.arg("channel", events_channel(self.members.tenant));
        call.arg("head_ttl", crate::HEAD_TTL);
        call.logs(self.members.tenant);
        self.members.encode(call, |_, _| {});
    }

    fn decode(&self, reply: &mut Reply) -> Result<Self::Reply, Error> {
        let dropped = reply.number()?;
        Ok((u32::try_from(dropped).unwrap_or(u32::MAX), unanswered(reply)?))
    }

    fn merge(&self, parts: Vec<PartReply>) -> Result<Self::Reply, Error> {
        merge_unanswered(self, parts)
    }
}
