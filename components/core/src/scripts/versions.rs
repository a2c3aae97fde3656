//! `versions.lua`: users' state versions, read before their truth.

use crate::Error;
use crate::keys::UserKeys;
use crate::script::{Call, Lua, PartReply, Reply, Script, lua, texts_by_item};

/// The versions of `users`.
pub struct Versions<'a> {
    pub tenant: &'a str,
    pub users: &'a [String],
}

impl Script for Versions<'_> {
    /// One version per user, in order.
    type Reply = Vec<String>;
    const WAITS_FOR_REPLICAS: bool = false;

    fn lua() -> &'static Lua {
        lua!("versions.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.each(self.users, |item, user| UserKeys::new(self.tenant, user).encode_meta(item));
    }

    fn decode(&self, reply: &mut Reply) -> Result<Vec<String>, Error> {
        reply.rest()
    }

    fn merge(&self, parts: Vec<PartReply>) -> Result<Vec<String>, Error> {
        texts_by_item(parts)
    }
}
