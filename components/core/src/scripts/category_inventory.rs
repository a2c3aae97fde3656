//! `category_inventory.lua`: what clearing a category would clear.

use std::time::Duration;

use crate::Error;
use crate::config::Limits;
use crate::script::{Call, Lua, PartReply, Reply, Script, decode_parts, lua};
use crate::scripts::Members;

/// The inventory of `category` for the members.
pub struct CategoryInventory<'a> {
    pub category: &'a str,
    pub members: Members<'a>,
    /// What the users keep, as their large conversations catch up.
    pub limits: Limits,
    /// With a SQL store: a state Redis cannot complete as a user catches up
    /// is left to the truth (the user is rebuilt), never built from 0.
    pub require_loaded: bool,
}

/// Per user: (user, [(conversation, last seq, unread)]).
pub type Inventory = Vec<(String, Vec<(String, u64, u64)>)>;

impl Script for CategoryInventory<'_> {
    type Reply = Inventory;
    const WAITS_FOR_REPLICAS: bool = false;
    const DEADLINE: Duration = Duration::from_secs(10);

    fn lua() -> &'static Lua {
        lua!("category_inventory.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.arg("category", self.category);
        call.arg("max_conversations", self.limits.max_conversations);
        call.arg("max_kept", self.limits.max_kept);
        call.arg("require_loaded", self.require_loaded);
        call.logs(self.members.tenant);
        self.members.encode(call, |_, _| {});
    }

    fn decode(&self, reply: &mut Reply) -> Result<Inventory, Error> {
        let mut users = Vec::new();
        while !reply.is_empty() {
            let user = reply.text()?;
            let n = reply.number()?;
            let rows =
                (0..n).map(|_| Ok((reply.text()?, reply.number()?, reply.number()?))).collect::<Result<_, Error>>()?;
            users.push((user, rows));
        }
        Ok(users)
    }

    fn merge(&self, parts: Vec<PartReply>) -> Result<Self::Reply, Error> {
        Ok(decode_parts(self, parts)?.into_iter().flatten().collect())
    }
}
