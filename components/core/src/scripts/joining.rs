//! `joining.lua`: the users joining a conversation are recorded, and its
//! head as stored, and whether it is large, read in the same step.

use crate::Error;
use crate::keys::ConversationKeys;
use crate::script::{Call, Lua, Reply, Script, lua};

/// Records `users` as joining `conversation` (while it is not large), and
/// reads its head.
pub struct RecordJoiners<'a> {
    pub tenant: &'a str,
    pub conversation: &'a str,
    pub users: &'a [String],
}

/// A conversation's head, for the members of a join in other slots.
#[derive(Default)]
pub struct HeadRead {
    /// The head's text; empty without one.
    pub text: String,
    /// The conversation is large (read diffusion).
    pub large: bool,
}

impl Script for RecordJoiners<'_> {
    type Reply = HeadRead;

    fn lua() -> &'static Lua {
        lua!("joining.lua")
    }

    fn encode(&self, call: &mut Call) {
        ConversationKeys::new(self.tenant, self.conversation).encode_only(call, &["head", "group", "joined"]);
        // One argument, one user per line: the users' keys are not this
        // script's (one slot), and identifiers hold no control characters.
        call.arg("users", self.users.join("\n").as_str());
    }

    fn decode(&self, reply: &mut Reply) -> Result<HeadRead, Error> {
        Ok(HeadRead { text: reply.text()?, large: reply.flag()? })
    }
}
