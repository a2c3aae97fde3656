//! `ping.lua`: the health check's Redis round trip.

use std::time::Duration;

use crate::Error;
use crate::script::{Call, Lua, Reply, Script, lua};

/// Runs a script that touches nothing: Redis is reachable and runs scripts.
pub struct Ping;

impl Script for Ping {
    type Reply = ();
    const WAITS_FOR_REPLICAS: bool = false;
    /// A probe must answer fast: load balancers and Kubernetes give it about a second.
    const DEADLINE: Duration = crate::HEALTH_DEADLINE;

    fn lua() -> &'static Lua {
        lua!("ping.lua")
    }

    fn encode(&self, _: &mut Call) {}

    fn decode(&self, reply: &mut Reply) -> Result<(), Error> {
        match reply.number()? {
            1 => Ok(()),
            _ => Err(crate::script::malformed()),
        }
    }
}
