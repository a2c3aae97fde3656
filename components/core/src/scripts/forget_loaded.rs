//! `forget_loaded.lua`: users whose Redis state stopped being the truth.

use std::time::Duration;

use crate::Error;
use crate::keys::UserKeys;
use crate::script::{Call, Lua, PartReply, Reply, Script, decode_parts, lua};

/// Makes the next read of each of `users` rebuild from the SQL store.
pub struct ForgetLoaded<'a> {
    pub users: &'a [(String, String)],
}

impl Script for ForgetLoaded<'_> {
    type Reply = u64;
    const DEADLINE: Duration = Duration::from_secs(10);

    fn lua() -> &'static Lua {
        lua!("forget_loaded.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.each(self.users, |item, (tenant, user)| UserKeys::new(tenant, user).encode_meta(item));
    }

    fn decode(&self, reply: &mut Reply) -> Result<u64, Error> {
        reply.number()
    }

    fn merge(&self, parts: Vec<PartReply>) -> Result<u64, Error> {
        Ok(decode_parts(self, parts)?.into_iter().sum())
    }
}
