//! `set_flag.lua`: mute, pin or mark unread one of the user's conversations.

use crate::Error;
use crate::bindings::unread::core::types::{ConversationFlag, ConversationState};
use crate::keys::{UserKeys, events_channel};
use crate::script::{Call, Lua, Reply, Script, lua, malformed};
use crate::scripts::Loaded;

/// `flag` on `conversation` of `user`.
pub struct SetFlag<'a> {
    pub tenant: &'a str,
    pub user: &'a str,
    pub conversation: &'a str,
    pub flag: &'a ConversationFlag,
    pub max_pins: u32,
    pub max_conversations: u32,
    pub max_kept: u32,
    pub require_loaded: bool,
}

/// What setting a flag gave.
pub enum FlagSet {
    /// The conversation's row and the badge.
    Done(ConversationState),
    /// The user has no such conversation.
    Unknown,
    /// Pinning one more would pass `max_pins`.
    TooManyPins,
}

impl SetFlag<'_> {
    /// The flag's letter and whether it goes on.
    fn letter(&self) -> (&'static str, bool) {
        match self.flag {
            ConversationFlag::Muted(on) => ("m", *on),
            ConversationFlag::Pinned(on) => ("p", *on),
            ConversationFlag::MarkedUnread => ("u", true),
        }
    }
}

impl Script for SetFlag<'_> {
    type Reply = Loaded<FlagSet>;

    fn lua() -> &'static Lua {
        lua!("set_flag.lua")
    }

    fn encode(&self, call: &mut Call) {
        let (letter, on) = self.letter();
        UserKeys::new(self.tenant, self.user).encode(call);
        call.arg("user", self.user);
        call.arg("conversation", self.conversation);
        call.arg("flag", letter);
        call.arg("on", on);
        call.arg("max_pins", self.max_pins);
        call.arg("max_conversations", self.max_conversations);
        call.arg("max_kept", self.max_kept);
        call.arg("require_loaded", self.require_loaded);
        call.arg("channel", events_channel(self.tenant));
        call.arg("head_ttl", crate::HEAD_TTL);
        call.logs(self.tenant);
    }

    fn decode(&self, reply: &mut Reply) -> Result<Self::Reply, Error> {
        reply.loaded(|reply, status| match status.as_str() {
            "unknown" => Ok(FlagSet::Unknown),
            "too_many_pins" => Ok(FlagSet::TooManyPins),
            "ok" => {
                let conversation = reply.conversation()?;
                Ok(FlagSet::Done(ConversationState { conversation, badge: reply.badge()? }))
            }
            _ => Err(malformed()),
        })
    }
}
