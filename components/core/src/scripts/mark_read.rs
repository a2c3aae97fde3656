//! `mark_read.lua`: the user has seen everything up to a seq.

use crate::Error;
use crate::bindings::unread::core::types::ReadState;
use crate::keys::{UserKeys, events_channel};
use crate::script::{Call, Lua, Reply, Script, lua, malformed};
use crate::scripts::Loaded;

/// A read up to `seq`, never more than `ahead` past the conversation's last seq.
pub struct MarkRead<'a> {
    pub tenant: &'a str,
    pub user: &'a str,
    pub conversation: &'a str,
    pub seq: u64,
    pub ahead: u64,
    pub max_conversations: u32,
    pub max_kept: u32,
    pub require_loaded: bool,
}

impl Script for MarkRead<'_> {
    /// The read state, and whether the read took a mark-unread away; `None`
    /// when the user left the conversation or it was deleted.
    type Reply = Loaded<Option<(ReadState, bool)>>;

    fn lua() -> &'static Lua {
        lua!("mark_read.lua")
    }

    fn encode(&self, call: &mut Call) {
        UserKeys::new(self.tenant, self.user).encode(call);
        call.arg("user", self.user);
        call.arg("conversation", self.conversation);
        call.arg("seq", self.seq);
        call.arg("ahead", self.ahead);
        call.arg("max_conversations", self.max_conversations);
        call.arg("max_kept", self.max_kept);
        call.arg("idle_ttl", crate::IDLE_TTL);
        call.arg("require_loaded", self.require_loaded);
        call.arg("channel", events_channel(self.tenant));
        call.logs(self.tenant);
    }

    fn decode(&self, reply: &mut Reply) -> Result<Self::Reply, Error> {
        let conversation = self.conversation.to_string();
        reply.loaded(|reply, status| {
            let read_seq = reply.number()?;
            let unread = reply.number()?;
            let mentions = reply.number()?;
            let unmarked = reply.flag()?;
            let badge = reply.badge()?;
            match status.as_str() {
                "gone" => Ok(None),
                "ok" | "kept" | "early" => {
                    Ok(Some((ReadState { conversation, read_seq, unread, mentions, badge }, unmarked)))
                }
                _ => Err(malformed()),
            }
        })
    }
}
