//! `forget_head.lua`: a deleted conversation's head goes.

use crate::Error;
use crate::keys::head_key;
use crate::script::{Call, Lua, Reply, Script, lua};

/// Deletes the head of `conversation`.
pub struct ForgetHead<'a> {
    pub tenant: &'a str,
    pub conversation: &'a str,
}

impl Script for ForgetHead<'_> {
    /// Whether there was a head.
    type Reply = bool;

    fn lua() -> &'static Lua {
        lua!("forget_head.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.key("head", head_key(self.tenant, self.conversation));
    }

    fn decode(&self, reply: &mut Reply) -> Result<bool, Error> {
        reply.flag()
    }
}
