//! `previews.lua`: the previews of listed rows, from their heads (on Redis
//! Cluster; on one Redis the list reads them with its rows), and the plain
//! reads of heads that need no renewal.

use crate::Error;
use crate::bindings::unread::core::types::Conversation;
use crate::cluster::get_each;
use crate::keys::ConversationKeys;
use crate::script::{Call, Lua, PartReply, Reply, Script, lua, malformed, one_text_each, texts_by_item};

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
    const WAITS_FOR_REPLICAS: bool = false;

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
    /// (none for no rows). On one Redis the script that read the rows read
    /// their previews too, in the same step. A row whose last message is
    /// younger than half a head's life reads its head with a plain `GET`:
    /// a head lives that long past its last message, so it needs no renewal
    /// yet. Older rows take the script, which renews their heads, at the
    /// same time; so do, after, the rows whose head moved past them since
    /// their page was read (the head's earlier messages hold theirs).
    pub async fn fill(tenant: &str, rows: &mut [Conversation]) -> Result<(), Error> {
        if rows.is_empty() || !crate::redis::is_cluster().await? {
            return Ok(());
        }
        let now = crate::now_ms();
        let (young, old): (Vec<usize>, Vec<usize>) = (0..rows.len()).partition(|&i| head_is_young(rows[i].ts, now));
        let keys: Vec<String> = young.iter().map(|&i| ConversationKeys::new(tenant, &rows[i].id).key("head")).collect();
        let (heads, renewed) = crate::both(get_each(&keys, Self::DEADLINE), Self::scripted(tenant, rows, &old)).await;
        let mut moved = Vec::new();
        for (&i, head) in young.iter().zip(heads?) {
            let Some(head) = head else { continue };
            let head = String::from_utf8(head).map_err(|_| malformed())?;
            match head_message(&head) {
                Some((seq, preview)) if seq == rows[i].last_seq => show(&mut rows[i], preview.to_string()),
                Some((seq, _)) if seq > rows[i].last_seq => moved.push(i),
                _ => {}
            }
        }
        for (i, preview) in renewed? {
            show(&mut rows[i], preview);
        }
        for (i, preview) in Self::scripted(tenant, rows, &moved).await? {
            show(&mut rows[i], preview);
        }
        Ok(())
    }

    /// The previews of `rows` at `indices`, by the script, with their
    /// indices (none for none).
    async fn scripted(tenant: &str, rows: &[Conversation], indices: &[usize]) -> Result<Vec<(usize, String)>, Error> {
        if indices.is_empty() {
            return Ok(Vec::new());
        }
        let picked: Vec<Conversation> = indices.iter().map(|&i| rows[i].clone()).collect();
        let previews = crate::redis::run(&Previews { tenant, rows: &picked }).await?;
        Ok(indices.iter().copied().zip(previews).collect())
    }
}

/// Whether a row whose last message came at `ts` (ms) is younger than half
/// a head's life at `now` (ms): its head, which lives that long past its
/// last message, needs no renewal yet. As `head_is_young` in `prelude.lua`
/// (a unit test holds the two together).
pub fn head_is_young(ts: u64, now: u64) -> bool {
    now.saturating_sub(ts) < crate::HEAD_TTL * 1000 / 2
}

/// A row shows the preview its head holds for its last message; where the
/// head holds none, what the row has (an earlier layout's, or none).
fn show(row: &mut Conversation, preview: String) {
    if !preview.is_empty() {
        row.preview = preview;
    }
}

/// A head's last message and its preview, from the head's text
/// (`seq:score:category:preview`) as `decode_head` in `prelude.lua` reads
/// it (a unit test holds the two together); none if the text is not one.
pub fn head_message(text: &str) -> Option<(u64, &str)> {
    let (seq, rest) = text.split_once(':')?;
    let (score, rest) = rest.split_once(':')?;
    let (category, preview) = rest.split_once(':')?;
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    let category_ok = category.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if seq.is_empty() || !digits(seq) || !digits(score) || !category_ok {
        return None;
    }
    Some((seq.parse().ok()?, preview))
}
