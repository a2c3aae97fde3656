//! `recall.lua`: a recalled message, for every listed member.

use crate::Error;
use crate::keys::{ConversationKeys, events_channel};
use crate::script::{Call, Lua, PartReply, Reply, Script, decode_parts, lua};
use crate::scripts::Members;
use crate::scripts::common::unanswered;

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

/// What a recall did.
#[derive(Debug, Default)]
pub struct Recalled {
    /// How many members' unread dropped.
    pub dropped: u32,
    /// A large conversation's log counter after the recall (from the part
    /// that holds the head).
    pub large: Option<u64>,
    /// The recall is new to the log.
    pub logged: bool,
    /// The members left to the SQL store.
    pub unanswered: Vec<String>,
}

impl Script for Recall<'_> {
    type Reply = Recalled;

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
        let dropped = u32::try_from(reply.number()?).unwrap_or(u32::MAX);
        let large = reply.optional_number()?;
        Ok(Recalled { dropped, large, logged: reply.flag()?, unanswered: unanswered(reply)? })
    }

    fn merge(&self, parts: Vec<PartReply>) -> Result<Self::Reply, Error> {
        let mut all = Recalled::default();
        for part in decode_parts(self, parts)? {
            all.dropped = all.dropped.saturating_add(part.dropped);
            all.large = all.large.or(part.large);
            all.logged |= part.logged;
            all.unanswered.extend(part.unanswered);
        }
        Ok(all)
    }
}
