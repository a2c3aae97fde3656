//! `clear_category.lua`: reads a category up to the seqs an inventory found.

use std::time::Duration;

use crate::Error;
use crate::keys::{UserKeys, events_channel};
use crate::script::{Call, Lua, PartReply, Reply, Script, decode_parts, lua};

/// One conversation of one user to read up to `seq`.
pub struct Clearing<'a> {
    pub user: &'a str,
    pub conversation: &'a str,
    pub seq: u64,
}

/// Clears `category` for the conversations listed (a user's together).
pub struct ClearCategory<'a> {
    pub tenant: &'a str,
    pub category: &'a str,
    pub max_conversations: u32,
    pub max_kept: u32,
    /// With a SQL store: a state Redis cannot complete as a user catches up
    /// is left to the truth (the user is rebuilt), never built from 0.
    pub require_loaded: bool,
    pub clearings: Vec<Clearing<'a>>,
}

impl Script for ClearCategory<'_> {
    /// How many conversations changed.
    type Reply = u64;
    const DEADLINE: Duration = Duration::from_secs(10);

    fn lua() -> &'static Lua {
        lua!("clear_category.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.arg("category", self.category);
        call.arg("max_conversations", self.max_conversations);
        call.arg("max_kept", self.max_kept);
        call.arg("require_loaded", self.require_loaded);
        call.arg("channel", events_channel(self.tenant));
        call.logs(self.tenant);
        call.each(&self.clearings, |item, clearing| {
            UserKeys::new(self.tenant, clearing.user).encode(item);
            item.arg("user", clearing.user);
            item.arg("conversation", clearing.conversation);
            item.arg("seq", clearing.seq);
        });
    }

    fn decode(&self, reply: &mut Reply) -> Result<u64, Error> {
        reply.number()
    }

    fn merge(&self, parts: Vec<PartReply>) -> Result<u64, Error> {
        Ok(decode_parts(self, parts)?.into_iter().sum())
    }
}
