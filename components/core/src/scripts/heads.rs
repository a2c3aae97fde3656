//! `heads.lua`: the truth's last messages written into conversation heads.

use crate::Error;
use crate::keys::ConversationKeys;
use crate::script::{Call, Lua, PartReply, Reply, Script, decode_parts, lua};
use crate::scripts::ClockMove;
use crate::sql::TruthRow;

/// The heads of conversations as the truth has them; a head that holds a
/// newer message keeps it.
pub struct Heads<'a> {
    pub tenant: &'a str,
    pub heads: Vec<&'a TruthRow>,
}

impl Script for Heads<'_> {
    /// How many heads changed, and where the large conversations' logs are
    /// (for their clocks on Redis Cluster). A rebuild announces no message:
    /// the message's touch does.
    type Reply = (u64, Vec<ClockMove>);

    fn lua() -> &'static Lua {
        lua!("heads.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.arg("head_ttl", crate::HEAD_TTL);
        call.clocks(self.tenant);
        call.each(&self.heads, |item, row| {
            ConversationKeys::new(self.tenant, &row.conversation).encode(item);
            item.arg("conversation", row.conversation.as_str());
            item.arg("seq", row.last_seq);
            item.arg("score", row.score());
            item.arg("category", row.category.as_str());
            item.arg("preview", row.preview.as_str());
            item.arg("large", row.large);
        });
    }

    fn decode(&self, reply: &mut Reply) -> Result<Self::Reply, Error> {
        let changed = reply.number()?;
        let logs = (0..reply.number()?)
            .map(|_| {
                let (conversation, counter, fresh) = (reply.text()?, Some(reply.number()?), reply.flag()?);
                Ok(ClockMove { conversation, counter, fresh, announce: None, logged: false, also: None })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok((changed, logs))
    }

    fn merge(&self, parts: Vec<PartReply>) -> Result<Self::Reply, Error> {
        let (mut changed, mut logs) = (0, Vec::new());
        for (n, more) in decode_parts(self, parts)? {
            changed += n;
            logs.extend(more);
        }
        Ok((changed, logs))
    }
}
