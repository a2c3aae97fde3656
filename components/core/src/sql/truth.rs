//! The truth of users' conversations, read from the app's views and
//! unread's own tables: what Redis must hold, and what degraded answers give.

use std::collections::HashMap;

use super::{Param, Store, Value, malformed, query, text};
use crate::Error;

/// One conversation of one user, as the truth has it.
#[derive(Clone, Debug)]
pub struct TruthRow {
    pub user: String,
    pub conversation: String,
    pub category: String,
    pub last_seq: u64,
    pub read_seq: u64,
    pub ts: u64,
    /// Compact JSON object text, as touch stores it.
    pub preview: String,
    pub muted: bool,
    pub pinned: bool,
    pub marked_unread: bool,
    /// Seqs above the read cursor that mention the user, ascending.
    pub mentions: Vec<u64>,
    /// Seqs above the read cursor that were recalled, ascending.
    pub recalled: Vec<u64>,
}

/// What one conversation counts, as the scripts' `counted` does.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counted {
    pub unread: u64,
    /// What the badge total counts: 0 when muted, 1 for a mark without unread.
    pub badge: u64,
    /// Unread of a muted conversation.
    pub muted: u64,
    pub mentions: u64,
}

impl TruthRow {
    /// The list score, as the scripts compute it (seed 000).
    pub fn score(&self) -> u64 {
        self.ts * 1000 + self.last_seq % 1000
    }

    /// The flags as the scripts write them: m muted, p pinned, u marked unread.
    pub fn flags(&self) -> String {
        [(self.muted, 'm'), (self.pinned, 'p'), (self.marked_unread, 'u')]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, c)| *c)
            .collect()
    }

    pub fn counted(&self) -> Counted {
        let counts = |s: &u64| *s > self.read_seq && *s <= self.last_seq;
        let recalled = self.recalled.iter().filter(|s| counts(s)).count() as u64;
        let unread = self.last_seq.saturating_sub(self.read_seq).saturating_sub(recalled);
        let mentions = self.mentions.iter().filter(|s| counts(s) && !self.recalled.contains(s)).count() as u64;
        let badge = match (self.muted, self.marked_unread && unread == 0) {
            (true, _) => 0,
            (false, true) => 1,
            (false, false) => unread,
        };
        Counted { unread, badge, muted: if self.muted { unread } else { 0 }, mentions }
    }
}

/// The `max_conversations` conversations each of `users` keeps (pinned
/// ones, then the newest, as the scripts trim), with their read cursors,
/// settings, mentions and recalls.
pub async fn truth(url: &str, tenant: &str, users: &[String], max_conversations: u32) -> Result<Vec<TruthRow>, Error> {
    if users.is_empty() {
        return Ok(Vec::new());
    }
    let mut params = vec![text(tenant)];
    params.extend(users.iter().map(|u| text(u)));
    params.push(Param::Int(max_conversations.into()));
    let mut rows: Vec<TruthRow> = query(url, |store| heads_statement(store, users.len()), params)
        .await?
        .into_iter()
        .map(truth_row)
        .collect::<Result<_, _>>()?;
    let marks = marks(url, tenant, users).await?;
    for row in &mut rows {
        let above = |s: &u64| *s > row.read_seq;
        row.recalled = marks.recalled.get(&row.conversation).into_iter().flatten().copied().filter(above).collect();
        row.mentions = marks
            .mentions
            .get(&row.conversation)
            .into_iter()
            .flatten()
            .filter(|m| {
                (m.user == row.user || m.user == "*") && m.sender != row.user && above(&m.seq) && m.seq <= row.last_seq
            })
            .map(|m| m.seq)
            .collect();
        row.recalled.dedup();
        row.mentions.dedup();
    }
    Ok(rows)
}

struct Mention {
    seq: u64,
    user: String,
    sender: String,
}

/// Recalls and mentions of the users' conversations, by conversation, seqs ascending.
#[derive(Default)]
struct Marks {
    recalled: HashMap<String, Vec<u64>>,
    mentions: HashMap<String, Vec<Mention>>,
}

async fn marks(url: &str, tenant: &str, users: &[String]) -> Result<Marks, Error> {
    // In the order the statement's placeholders occur.
    let users_params = || users.iter().map(|u| text(u));
    let mut params = vec![text(tenant), text(tenant)];
    params.extend(users_params());
    params.extend([text(tenant), text(tenant)]);
    params.extend(users_params());
    params.extend(users_params());
    let mut marks = Marks::default();
    for row in query(url, |store| marks_statement(store, users.len()), params).await? {
        let mut values = row.into_iter();
        let mut next_text = || match values.next() {
            Some(Value::Text(t)) => Ok(t),
            _ => Err(malformed("unread_recalls / unread_mentions")),
        };
        let (kind, conversation, user, sender) = (next_text()?, next_text()?, next_text()?, next_text()?);
        let seq = match values.next() {
            Some(Value::Int(n)) if n > 0 => n as u64,
            _ => return Err(malformed("seq")),
        };
        match kind.as_str() {
            "r" => marks.recalled.entry(conversation).or_default().push(seq),
            _ => marks.mentions.entry(conversation).or_default().push(Mention { seq, user, sender }),
        }
    }
    Ok(marks)
}

fn heads_statement(store: &Store, users: usize) -> String {
    let user_list = (0..users).map(|i| store.placeholder(i + 2)).collect::<Vec<_>>().join(", ");
    let (as_text, as_key) = match store {
        Store::Mysql(_) => ("CAST(h.preview AS CHAR)", "CAST(m.user_id AS BINARY)"),
        Store::Postgres(_) => ("h.preview::text", "m.user_id"),
    };
    format!(
        "SELECT user_id, conversation, category, last_seq, last_ts, preview, read_seq, muted, pinned, marked_unread FROM (\
           SELECT {as_key} AS user_id, h.conversation AS conversation, h.category AS category, \
                  h.last_seq AS last_seq, h.last_ts AS last_ts, {as_text} AS preview, \
                  COALESCE(r.read_seq, 0) AS read_seq, COALESCE(r.muted, 0) AS muted, \
                  COALESCE(r.pinned, 0) AS pinned, COALESCE(r.marked_unread, 0) AS marked_unread, \
                  ROW_NUMBER() OVER (PARTITION BY m.user_id ORDER BY COALESCE(r.pinned, 0) DESC, \
                    h.last_ts * 1000 + MOD(h.last_seq, 1000) DESC, h.conversation DESC) AS rn \
           FROM unread_memberships m \
           JOIN unread_conversation_heads h ON h.tenant = m.tenant AND h.conversation = m.conversation \
           LEFT JOIN unread_read_cursors r \
             ON r.tenant = m.tenant AND r.user_id = m.user_id AND r.conversation = m.conversation \
           WHERE m.tenant = {tenant} AND m.user_id IN ({user_list}) AND h.last_seq > 0\
         ) t WHERE rn <= {max}",
        tenant = store.placeholder(1),
        max = store.placeholder(users + 2),
    )
}

/// (kind 'r' | 'm', conversation, user, sender, seq) of the users'
/// conversations, seqs ascending. Placeholders, in order: tenant, tenant,
/// users (recalls); tenant, tenant, users, users (mentions).
fn marks_statement(store: &Store, users: usize) -> String {
    let counter = std::cell::Cell::new(0);
    let next = || {
        counter.set(counter.get() + 1);
        store.placeholder(counter.get())
    };
    let list = || (0..users).map(|_| next()).collect::<Vec<_>>().join(", ");
    let as_key = |column: &str| match store {
        Store::Mysql(_) => format!("CAST({column} AS BINARY)"),
        Store::Postgres(_) => column.to_string(),
    };
    let members = |tenant: String| {
        let users = list();
        format!(
            "SELECT {} FROM unread_memberships m WHERE m.tenant = {tenant} AND m.user_id IN ({users})",
            as_key("m.conversation")
        )
    };
    let recalls = format!(
        "SELECT 'r' AS kind, {} AS conversation, '' AS user_id, '' AS sender, x.seq AS seq FROM unread_recalls x \
           WHERE x.tenant = {} AND x.conversation IN ({})",
        as_key("x.conversation"),
        next(),
        members(next()),
    );
    let mentions = format!(
        "SELECT 'm', {}, {}, {}, y.seq FROM unread_mentions y \
           WHERE y.tenant = {} AND y.conversation IN ({}) AND (y.user_id = '*' OR y.user_id IN ({}))",
        as_key("y.conversation"),
        as_key("y.user_id"),
        as_key("y.sender"),
        next(),
        members(next()),
        list(),
    );
    format!("{recalls} UNION ALL {mentions} ORDER BY seq")
}

fn truth_row(row: Vec<Value>) -> Result<TruthRow, Error> {
    let mut values = row.into_iter();
    let mut next_text = |what: &str| match values.next() {
        Some(Value::Text(t)) => Ok(t),
        _ => Err(malformed(what)),
    };
    let user = next_text("user_id")?;
    let conversation = next_text("conversation")?;
    let category = next_text("category")?;
    let mut number = |what: &str| match values.next() {
        Some(Value::Int(n)) if n >= 0 => Ok(n as u64),
        _ => Err(malformed(what)),
    };
    let last_seq = number("last_seq")?;
    let ts = number("last_ts")?;
    let preview = match values.next() {
        Some(Value::Text(t)) => compact_preview(&t),
        Some(Value::Null) => "{}".to_string(),
        _ => return Err(malformed("preview")),
    };
    let mut number = |what: &str| match values.next() {
        Some(Value::Int(n)) if n >= 0 => Ok(n as u64),
        _ => Err(malformed(what)),
    };
    let read_seq = number("read_seq")?;
    let muted = number("muted")? == 1;
    let pinned = number("pinned")? == 1;
    let marked_unread = number("marked_unread")? == 1;
    Ok(TruthRow {
        user,
        conversation,
        category,
        last_seq,
        read_seq,
        ts,
        preview,
        muted,
        pinned,
        marked_unread,
        mentions: Vec::new(),
        recalled: Vec::new(),
    })
}

/// The preview as touch stores it: compact JSON (order kept).
fn compact_preview(text: &str) -> String {
    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
        .ok()
        .and_then(|object| serde_json::to_string(&object).ok())
        .unwrap_or_else(|| "{}".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(last_seq: u64, read_seq: u64) -> TruthRow {
        TruthRow {
            user: "u2".into(),
            conversation: "c1".into(),
            category: "chat".into(),
            last_seq,
            read_seq,
            ts: 1,
            preview: "{}".into(),
            muted: false,
            pinned: false,
            marked_unread: false,
            mentions: Vec::new(),
            recalled: Vec::new(),
        }
    }

    #[test]
    fn previews_are_compacted_like_touch_stores_them() {
        assert_eq!(compact_preview("{ \"b\": 1,  \"a\": \"x\" }"), r#"{"b":1,"a":"x"}"#);
        assert_eq!(compact_preview("not json"), "{}");
    }

    #[test]
    fn recalls_and_mentions_count_only_between_the_cursor_and_the_last_message() {
        let mut r = TruthRow { recalled: vec![3, 9], mentions: vec![3, 4, 9], ..row(5, 2) };
        assert_eq!(r.counted(), Counted { unread: 2, badge: 2, muted: 0, mentions: 1 });
        r.muted = true;
        assert_eq!(r.counted(), Counted { unread: 2, badge: 0, muted: 2, mentions: 1 });
    }

    #[test]
    fn a_mark_counts_one_only_without_unread_and_unmuted() {
        let marked = TruthRow { marked_unread: true, ..row(5, 5) };
        assert_eq!(marked.counted().badge, 1);
        assert_eq!(TruthRow { marked_unread: true, ..row(5, 3) }.counted().badge, 2);
        assert_eq!(TruthRow { muted: true, ..marked.clone() }.counted().badge, 0);
        assert_eq!(TruthRow { muted: true, pinned: true, ..marked }.flags(), "mpu");
    }
}
