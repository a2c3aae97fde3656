//! `heads.lua`: the truth's last messages written into conversation heads.

use crate::Error;
use crate::keys::ConversationKeys;
use crate::script::{Call, Lua, PartReply, Reply, Script, decode_parts, lua};
use crate::sql::TruthRow;

/// The heads of conversations as the truth has them; a head that holds a
/// newer message keeps it.
pub struct Heads<'a> {
    pub tenant: &'a str,
    pub heads: Vec<&'a TruthRow>,
}

impl Script for Heads<'_> {
    /// How many heads changed.
    type Reply = u64;

    fn lua() -> &'static Lua {
        lua!("heads.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.arg("head_ttl", crate::HEAD_TTL);
        call.each(&self.heads, |item, row| {
            ConversationKeys::new(self.tenant, &row.conversation).encode(item);
            item.arg("seq", row.last_seq);
            item.arg("score", row.score());
            item.arg("category", row.category.as_str());
            item.arg("preview", row.preview.as_str());
            item.arg("large", row.large);
        });
    }

    fn decode(&self, reply: &mut Reply) -> Result<u64, Error> {
        reply.number()
    }

    fn merge(&self, parts: Vec<PartReply>) -> Result<u64, Error> {
        Ok(decode_parts(self, parts)?.into_iter().sum())
    }
}
