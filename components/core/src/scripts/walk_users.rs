//! `walk_users.lua`: the users of a tenant that have state (no SQL store).

use std::time::Duration;

use crate::Error;
use crate::keys::{meta_pattern, user_of_meta_key};
use crate::script::{Call, Lua, Reply, Script, lua};

/// The next users after SCAN cursor `cursor`.
pub struct WalkUsers<'a> {
    pub tenant: &'a str,
    pub cursor: &'a str,
    /// The run id of the server that issued `cursor` (as this script
    /// answers it): on another server the walk starts over. `""`: the
    /// caller guards the walk itself (a cluster's layout names its
    /// primaries' run ids).
    pub server: &'a str,
    pub wanted: u32,
}

impl Script for WalkUsers<'_> {
    /// The next SCAN cursor ('0': done), the server's run id (its first 16
    /// digits; `""` if it does not tell) and the users found.
    type Reply = (String, String, Vec<String>);
    const WAITS_FOR_REPLICAS: bool = false;
    const DEADLINE: Duration = Duration::from_secs(10);

    fn lua() -> &'static Lua {
        lua!("walk_users.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.arg("pattern", meta_pattern(self.tenant));
        call.arg("cursor", self.cursor);
        call.arg("server", self.server);
        call.arg("wanted", self.wanted);
    }

    fn decode(&self, reply: &mut Reply) -> Result<Self::Reply, Error> {
        let cursor = reply.text()?;
        let server = reply.text()?;
        let users = reply.rest()?.iter().filter_map(|key| user_of_meta_key(self.tenant, key)).collect();
        Ok((cursor, server, users))
    }
}
