//! `previews.lua`: the previews of listed rows, from their heads (on Redis
//! Cluster; on one Redis the list reads them with its rows).

use crate::Error;
use crate::bindings::unread::core::types::Conversation;
use crate::keys::ConversationKeys;
use crate::script::{Call, Lua, PartReply, Reply, Script, lua, one_text_each, texts_by_item};

/// What a row shows when its head has no preview for its last message (none
/// yet, or the member was not told of the conversation's newer messages)
/// and its state kept none from an earlier layout.
pub const NO_PREVIEW: &str = "{}";

/// The preview of each of `rows`' last message.
pub struct Previews<'a> {
    pub tenant: &'a str,
    pub rows: &'a [Conversation],
}

impl Script for Previews<'_> {
    /// One preview per row, in order ('' where the head has none for it).
    type Reply = Vec<String>;

    fn lua() -> &'static Lua {
        lua!(base "previews.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.arg("head_ttl", crate::HEAD_TTL);
        call.each(self.rows, |item, row| {
            ConversationKeys::new(self.tenant, &row.id).encode_only(item, &["head", "earlier"]);
            item.arg("last", row.last_seq);
        });
    }

    fn decode(&self, reply: &mut Reply) -> Result<Vec<String>, Error> {
        one_text_each(self.rows.len(), reply.rest()?)
    }

    fn merge(&self, parts: Vec<PartReply>) -> Result<Vec<String>, Error> {
        one_text_each(self.rows.len(), texts_by_item(parts)?)
    }
}

impl Previews<'_> {
    /// Fills in the previews of `rows` from their heads on Redis Cluster
    /// (one script per slot; none for no rows). On one Redis the script
    /// that read the rows read their previews too, in the same step.
    pub async fn fill(tenant: &str, rows: &mut [Conversation]) -> Result<(), Error> {
        if rows.is_empty() || !crate::redis::is_cluster().await? {
            return Ok(());
        }
        let previews = crate::redis::run(&Previews { tenant, rows }).await?;
        for (row, preview) in rows.iter_mut().zip(previews) {
            if !preview.is_empty() {
                row.preview = preview;
            }
        }
        Ok(())
    }
}
