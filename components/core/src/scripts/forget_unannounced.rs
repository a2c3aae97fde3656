//! `forget_unannounced.lua`: on Redis Cluster, a rebuild's note of a large
//! conversation's message goes once the message's touch announced it.

use crate::Error;
use crate::keys::ConversationKeys;
use crate::script::{Call, Lua, Reply, Script, lua};

/// Forgets the note a rebuild left for message `seq` of `conversation`,
/// once its event is out (see `touch.lua`, `noted`).
pub struct ForgetUnannounced<'a> {
    pub tenant: &'a str,
    pub conversation: &'a str,
    pub seq: u64,
}

impl Script for ForgetUnannounced<'_> {
    /// Whether the note went.
    type Reply = bool;
    /// The touch is done and its event out: a replica that lags must not
    /// make it a 503 (sent again, it would be announced again). A note a
    /// failover brings back costs that event twice at most.
    const WAITS_FOR_REPLICAS: bool = false;

    fn lua() -> &'static Lua {
        lua!(base "forget_unannounced.lua")
    }

    fn encode(&self, call: &mut Call) {
        ConversationKeys::new(self.tenant, self.conversation).encode_only(call, &["unannounced"]);
        call.arg("seq", self.seq);
    }

    fn decode(&self, reply: &mut Reply) -> Result<bool, Error> {
        reply.flag()
    }
}
