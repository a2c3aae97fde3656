//! `heads.lua`: the truth's last messages written into conversation heads.

use crate::Error;
use crate::keys::head_key;
use crate::script::{Call, Lua, Reply, Script, lua};

/// The heads of `heads` (conversation, last seq, its preview) as the truth
/// has them; a head that holds a newer message keeps it.
pub struct Heads<'a> {
    pub tenant: &'a str,
    pub heads: Vec<(&'a str, u64, &'a str)>,
}

impl Script for Heads<'_> {
    /// How many heads changed.
    type Reply = u64;

    fn lua() -> &'static Lua {
        lua!("heads.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.arg("head_ttl", crate::HEAD_TTL);
        call.each(&self.heads, |item, &(conversation, seq, preview)| {
            item.key("head", head_key(self.tenant, conversation));
            item.arg("seq", seq);
            item.arg("preview", preview);
        });
    }

    fn decode(&self, reply: &mut Reply) -> Result<u64, Error> {
        reply.number()
    }
}
