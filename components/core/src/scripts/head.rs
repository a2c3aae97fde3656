//! `head.lua`: a conversation's head as stored.

use crate::Error;
use crate::keys::ConversationKeys;
use crate::script::{Call, Lua, Reply, Script, lua};

/// Reads the head of `conversation`.
pub struct ReadHead<'a> {
    pub tenant: &'a str,
    pub conversation: &'a str,
}

impl Script for ReadHead<'_> {
    /// The head's text; empty without one.
    type Reply = String;

    fn lua() -> &'static Lua {
        lua!("head.lua")
    }

    fn encode(&self, call: &mut Call) {
        ConversationKeys::new(self.tenant, self.conversation).encode_only(call, &["head"]);
    }

    fn decode(&self, reply: &mut Reply) -> Result<String, Error> {
        reply.text()
    }
}
