//! `badge.lua`: the user's badge.

use crate::Error;
use crate::bindings::unread::core::types::AppBadge;
use crate::config::Limits;
use crate::keys::UserKeys;
use crate::script::{Call, Lua, Reply, Script, lua, malformed};
use crate::scripts::Loaded;

/// The badge of `user`.
pub struct Badge<'a> {
    pub tenant: &'a str,
    pub user: &'a str,
    pub require_loaded: bool,
    /// What the user keeps, as their large conversations catch up.
    pub limits: Limits,
}

impl Script for Badge<'_> {
    type Reply = Loaded<AppBadge>;

    fn lua() -> &'static Lua {
        lua!("badge.lua")
    }

    fn encode(&self, call: &mut Call) {
        UserKeys::new(self.tenant, self.user).encode(call);
        call.arg("require_loaded", self.require_loaded);
        call.arg("max_conversations", self.limits.max_conversations);
        call.arg("max_kept", self.limits.max_kept);
        call.logs();
    }

    fn decode(&self, reply: &mut Reply) -> Result<Self::Reply, Error> {
        reply.loaded(|reply, status| if status == "ok" { reply.badge() } else { Err(malformed()) })
    }
}
