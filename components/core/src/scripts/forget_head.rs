//! `forget_head.lua`: a deleted conversation's head goes.

use crate::Error;
use crate::keys::ConversationKeys;
use crate::script::{Call, Lua, Reply, Script, lua};

/// Deletes the head (and pending recall previews, earlier messages, log and
/// clock) of `conversation`.
pub struct ForgetHead<'a> {
    pub tenant: &'a str,
    pub conversation: &'a str,
}

impl Script for ForgetHead<'_> {
    /// How many of its keys there were.
    type Reply = u64;

    fn lua() -> &'static Lua {
        lua!("forget_head.lua")
    }

    fn encode(&self, call: &mut Call) {
        ConversationKeys::new(self.tenant, self.conversation).encode(call);
        call.arg("conversation", self.conversation);
        call.clocks(self.tenant);
    }

    fn decode(&self, reply: &mut Reply) -> Result<u64, Error> {
        reply.number()
    }
}
