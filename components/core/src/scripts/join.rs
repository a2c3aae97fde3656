//! `join.lua`: members who joined after a seq.

use crate::Error;
use crate::keys::events_channel;
use crate::script::{Call, Lua, Reply, Script, lua};
use crate::scripts::Members;
use crate::scripts::common::unanswered;

/// The members joined `conversation` after message `seq`.
pub struct Join<'a> {
    pub conversation: &'a str,
    pub seq: u64,
    pub max_kept: u32,
    pub require_loaded: bool,
    pub members: Members<'a>,
}

impl Script for Join<'_> {
    /// How many members' state changed, and the members left to the SQL store.
    type Reply = (u32, Vec<String>);

    fn lua() -> &'static Lua {
        lua!("join.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.arg("conversation", self.conversation);
        call.arg("seq", self.seq);
        call.arg("max_kept", self.max_kept);
        call.arg("require_loaded", self.require_loaded);
        call.arg("channel", events_channel(self.members.tenant));
        self.members.encode(call, |_, _| {});
    }

    fn decode(&self, reply: &mut Reply) -> Result<Self::Reply, Error> {
        let changed = reply.number()?;
        Ok((u32::try_from(changed).unwrap_or(u32::MAX), unanswered(reply)?))
    }
}
