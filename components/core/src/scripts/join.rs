//! `join.lua`: members who joined after a seq.

use crate::Error;
use crate::keys::{ConversationKeys, events_channel};
use crate::script::{Call, Lua, PartReply, Reply, Script, decode_parts, lua};
use crate::scripts::{HeadRead, Members};

/// The members joined `conversation` after message `seq`.
pub struct Join<'a> {
    pub conversation: &'a str,
    pub seq: u64,
    pub max_conversations: u32,
    pub max_kept: u32,
    pub members: Members<'a>,
    /// The head, read first on Redis Cluster for the members outside its
    /// slot, as the joiners were recorded ([`super::RecordJoiners`]); none
    /// elsewhere, where the script reads the head and records them itself.
    pub head: Option<&'a HeadRead>,
}

impl Script for Join<'_> {
    /// How many members' state changed.
    type Reply = u32;

    fn lua() -> &'static Lua {
        lua!("join.lua")
    }

    fn encode(&self, call: &mut Call) {
        let keys = ConversationKeys::new(self.members.tenant, self.conversation);
        keys.encode_only(call, &["head", "group", "joined"]);
        call.arg("conversation", self.conversation);
        call.arg("seq", self.seq);
        call.arg("max_conversations", self.max_conversations);
        call.arg("max_kept", self.max_kept);
        call.arg("idle_ttl", crate::IDLE_TTL);
        call.arg("channel", events_channel(self.members.tenant));
        let head = self.head.map_or("", |head| head.text.as_str());
        call.arg("head", head);
        call.arg("large", self.head.is_some_and(|head| head.large));
        call.arg("recorded", self.head.is_some());
        call.logs(self.members.tenant);
        self.members.encode(call, |_, _| {});
    }

    fn decode(&self, reply: &mut Reply) -> Result<Self::Reply, Error> {
        Ok(u32::try_from(reply.number()?).unwrap_or(u32::MAX))
    }

    fn merge(&self, parts: Vec<PartReply>) -> Result<u32, Error> {
        Ok(decode_parts(self, parts)?.into_iter().fold(0, u32::saturating_add))
    }
}
