//! `adopt.lua`: users who joined a conversation before the message that
//! made it large become members of its log.

use crate::Error;
use crate::script::{Call, Lua, PartReply, Reply, Script, decode_parts, lua};
use crate::scripts::Members;

/// Makes `members` members of large `conversation`'s log, those who still
/// have it and are not members yet.
pub struct Adopt<'a> {
    pub conversation: &'a str,
    pub members: Members<'a>,
}

impl Script for Adopt<'_> {
    /// How many became members.
    type Reply = u32;

    fn lua() -> &'static Lua {
        lua!("adopt.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.arg("conversation", self.conversation);
        self.members.encode(call, |_, _| {});
    }

    fn decode(&self, reply: &mut Reply) -> Result<u32, Error> {
        Ok(u32::try_from(reply.number()?).unwrap_or(u32::MAX))
    }

    fn merge(&self, parts: Vec<PartReply>) -> Result<u32, Error> {
        Ok(decode_parts(self, parts)?.into_iter().fold(0, u32::saturating_add))
    }
}
