//! `group_logs.lua`: what members of large conversations catch up with, for
//! a call on Redis Cluster, and the reply by which a script asks for it.

use spin_sdk::redis::RedisResult;

use crate::Error;
use crate::keys::ConversationKeys;
use crate::script::{Call, Lua, PartReply, Reply, Script, lua, malformed, one_text_each, texts_by_item};

/// The first element of a reply that asks for the logs instead of answering
/// (`LOGS_WANTED` in `prelude.lua`; a unit test holds the two together).
pub const LOGS_WANTED: &str = "unread:logs-wanted";

/// What `logs` argument a catch-up script is sent with on Redis Cluster
/// before it asked for any: none given yet.
pub const NO_LOGS_YET: &str = "-";

/// One large conversation a script's users catch up with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WantedLog {
    /// The conversation.
    pub conversation: String,
    /// How far the users caught up (the least of them).
    pub after: u64,
}

/// What a script's first run on Redis Cluster asks for instead of
/// answering (see `take_logs` in `prelude.lua`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogsWanted {
    /// The logs its users catch up with.
    pub logs: Vec<WantedLog>,
    /// Where, in the reply, the answer begins that the script gives if none
    /// of those logs moved past where its user caught up (one user's badge:
    /// `with_standing` in `prelude.lua`); none if it gave none.
    pub standing: Option<usize>,
}

/// The logs a script's reply asks for, if it asks (see `take_logs`).
pub fn logs_wanted(values: &[RedisResult]) -> Result<Option<LogsWanted>, Error> {
    match values.first() {
        Some(RedisResult::Binary(first)) if first == LOGS_WANTED.as_bytes() => {}
        _ => return Ok(None),
    }
    let mut reply = Reply::new(values[1..].to_vec());
    let n = reply.number()?;
    let records = usize::try_from(n).ok().and_then(|n| n.checked_mul(2)?.checked_add(2)).ok_or_else(malformed)?;
    if values.len() < records {
        return Err(malformed());
    }
    let mut logs = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let conversation = reply.text()?;
        // A text that is not a record was never caught up: as the script does.
        if let Some(after) = membership_applied(&reply.text()?) {
            logs.push(WantedLog { conversation, after });
        }
    }
    let standing = (values.len() > records).then_some(records);
    Ok(Some(LogsWanted { logs, standing }))
}

/// How far a membership record says its member caught up: its leading
/// number, a line of its own (`membership_applied` in `prelude.lua`; a unit
/// test holds the two together). None: not a record.
pub fn membership_applied(record: &str) -> Option<u64> {
    record.split('\n').next()?.parse().ok()
}

/// Reads the logs `wanted` names, each from its conversation's slot.
pub struct GroupLogs<'a> {
    /// How the names of the tenant's conversation keys begin (the argument
    /// `conversations` of the call that asked).
    pub conversations: &'a str,
    pub wanted: &'a [WantedLog],
}

impl Script for GroupLogs<'_> {
    /// One line per log, as the catch-up scripts take them in `logs`.
    type Reply = Vec<String>;
    const WAITS_FOR_REPLICAS: bool = false;

    fn lua() -> &'static Lua {
        lua!("group_logs.lua")
    }

    fn encode(&self, call: &mut Call) {
        call.each(self.wanted, |item, log| {
            ConversationKeys::under(self.conversations, &log.conversation).encode_only(item, &["head", "group"]);
            item.arg("conversation", log.conversation.as_str());
            item.arg("after", log.after);
        });
    }

    fn decode(&self, reply: &mut Reply) -> Result<Vec<String>, Error> {
        one_text_each(self.wanted.len(), reply.rest()?)
    }

    fn merge(&self, parts: Vec<PartReply>) -> Result<Vec<String>, Error> {
        one_text_each(self.wanted.len(), texts_by_item(parts)?)
    }
}

impl GroupLogs<'_> {
    /// The `logs` argument that gives a script every log `wanted` names.
    /// (None at all is one empty line: an empty `logs` means one Redis.)
    pub fn argument(logs: Vec<String>) -> Vec<u8> {
        if logs.is_empty() {
            return b"\n".to_vec();
        }
        logs.join("\n").into_bytes()
    }
}
