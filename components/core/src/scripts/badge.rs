//! `badge.lua`: users' badges.

use crate::Error;
use crate::bindings::unread::core::types::AppBadge;
use crate::config::Limits;
use crate::script::{Call, Lua, PartReply, Reply, Script, by_item, lua, malformed};
use crate::scripts::{Loaded, Members};

/// The badges of `users`, in their order.
pub struct Badge<'a> {
    pub users: Members<'a>,
    pub require_loaded: bool,
    /// What each user keeps, as their large conversations catch up.
    pub limits: Limits,
}

impl Script for Badge<'_> {
    type Reply = Vec<Loaded<AppBadge>>;
    const WAITS_FOR_REPLICAS: bool = false;

    fn lua() -> &'static Lua {
        lua!("badge.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.arg("require_loaded", self.require_loaded);
        call.arg("max_conversations", self.limits.max_conversations);
        call.arg("max_kept", self.limits.max_kept);
        call.logs(self.users.tenant);
        self.users.encode(call, |_, _| {});
    }

    fn decode(&self, reply: &mut Reply) -> Result<Self::Reply, Error> {
        let badges: Vec<_> = (0..self.users.users.len()).map(|_| one(reply)).collect::<Result<_, _>>()?;
        if !reply.is_empty() {
            return Err(malformed());
        }
        Ok(badges)
    }

    fn merge(&self, parts: Vec<PartReply>) -> Result<Self::Reply, Error> {
        let badges = by_item(parts, one)?;
        if badges.len() != self.users.users.len() {
            return Err(malformed());
        }
        Ok(badges)
    }
}

/// One user's answer: a miss, or the badge.
fn one(reply: &mut Reply) -> Result<Loaded<AppBadge>, Error> {
    reply.loaded(|reply, status| if status == "ok" { reply.badge() } else { Err(malformed()) })
}
