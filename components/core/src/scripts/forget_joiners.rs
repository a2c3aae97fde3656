//! `forget_joiners.lua`: the users a large conversation's messages handed
//! over as joiners are forgotten once they are members of its log, or
//! when they leave it.

use crate::Error;
use crate::keys::ConversationKeys;
use crate::script::{Call, Lua, Reply, Script, lua};

/// Forgets `users` as joiners of `conversation` (see [`super::Adopt`]).
pub struct ForgetJoiners<'a> {
    pub tenant: &'a str,
    pub conversation: &'a str,
    pub users: &'a [String],
}

impl Script for ForgetJoiners<'_> {
    /// How many were forgotten.
    type Reply = u32;

    fn lua() -> &'static Lua {
        lua!(base "forget_joiners.lua")
    }

    fn encode(&self, call: &mut Call) {
        ConversationKeys::new(self.tenant, self.conversation).encode_only(call, &["joined"]);
        // One argument, one user per line, as for RecordJoiners.
        call.arg("users", self.users.join("\n").as_str());
    }

    fn decode(&self, reply: &mut Reply) -> Result<u32, Error> {
        Ok(u32::try_from(reply.number()?).unwrap_or(u32::MAX))
    }
}
