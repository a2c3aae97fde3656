//! `head.lua`: a conversation's head as stored, and whether it is large.

use crate::Error;
use crate::keys::ConversationKeys;
use crate::script::{Call, Lua, Reply, Script, lua};

/// Reads the head of `conversation`.
pub struct ReadHead<'a> {
    pub tenant: &'a str,
    pub conversation: &'a str,
}

/// A conversation's head, for the members of a join in other slots.
#[derive(Default)]
pub struct HeadRead {
    /// The head's text; empty without one.
    pub text: String,
    /// The conversation is large (read diffusion).
    pub large: bool,
}

impl Script for ReadHead<'_> {
    type Reply = HeadRead;

    fn lua() -> &'static Lua {
        lua!("head.lua")
    }

    fn encode(&self, call: &mut Call) {
        ConversationKeys::new(self.tenant, self.conversation).encode_only(call, &["head", "group"]);
    }

    fn decode(&self, reply: &mut Reply) -> Result<HeadRead, Error> {
        Ok(HeadRead { text: reply.text()?, large: reply.flag()? })
    }
}
