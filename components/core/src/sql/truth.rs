//! The truth of users' conversations, read from the app's views and
//! unread's own tables: what Redis must hold, and what degraded answers give.

use std::collections::{HashMap, HashSet};

use super::{Param, Store, Value, as_key, exactly, malformed, query_built, text};
use crate::Error;
use crate::config::Limits;
use crate::state::{self, Counts};

/// One conversation of one user, as the truth has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TruthRow {
    pub user: String,
    pub conversation: String,
    /// Empty for a conversation without messages yet.
    pub category: String,
    pub last_seq: u64,
    pub read_seq: u64,
    pub ts: u64,
    /// Compact JSON object text, as touch stores it.
    pub preview: String,
    pub muted: bool,
    pub pinned: bool,
    pub marked_unread: bool,
    /// Seqs above the read cursor that mention the user (not recalled), ascending.
    pub mentions: Vec<u64>,
    /// Seqs above the read cursor that were recalled, ascending.
    pub recalled: Vec<u64>,
    /// In the user's list (else kept: trimmed, or no message yet).
    pub listed: bool,
    /// The conversation is large (read diffusion): the user's state
    /// catches up with its head and log.
    pub large: bool,
}

/// The truth of some users.
pub struct Truth {
    /// Their conversations: the listed ones, then the kept ones, each in
    /// list order.
    pub rows: Vec<TruthRow>,
    /// Users whose truth holds more than the rows (beyond what is kept).
    pub partial: HashSet<String>,
}

impl Truth {
    /// Each user's rows, in the truth's order, found in one pass (a call
    /// may carry the truth of hundreds of users).
    pub fn rows_by_user(&self) -> HashMap<&str, Vec<&TruthRow>> {
        let mut by_user: HashMap<&str, Vec<&TruthRow>> = HashMap::new();
        for row in &self.rows {
            by_user.entry(row.user.as_str()).or_default().push(row);
        }
        by_user
    }
}

impl TruthRow {
    /// The list score, as touch computes it.
    pub fn score(&self) -> u64 {
        state::score(self.ts, self.last_seq)
    }

    /// Where the row stands (greater first): listed, then pinned, then the
    /// newest; as the list orders them.
    pub fn order(&self) -> (bool, bool, u64, &str) {
        (self.listed, self.pinned, self.score(), &self.conversation)
    }

    /// What the row counts by.
    pub fn counts(&self) -> Counts {
        let between = |s: &&u64| **s > self.read_seq && **s <= self.last_seq;
        Counts {
            last: self.last_seq,
            read: self.read_seq,
            mentions: self.mentions.iter().filter(between).count() as u64,
            recalled: self.recalled.iter().filter(between).count() as u64,
            muted: self.muted,
            marked_unread: self.marked_unread,
        }
    }

    /// A row to test encoders with.
    #[cfg(test)]
    pub fn sample() -> TruthRow {
        TruthRow {
            user: "u2".into(),
            conversation: "c1".into(),
            category: "chat".into(),
            last_seq: 5,
            read_seq: 2,
            ts: 1,
            preview: "{}".into(),
            muted: false,
            pinned: false,
            marked_unread: false,
            mentions: Vec::new(),
            recalled: Vec::new(),
            listed: true,
            large: false,
        }
    }
}

/// Each of `users`' conversations as the scripts would hold them: the
/// `max_conversations` listed (pinned ones, then the newest, as touch
/// trims), then up to `max_kept` more with what they keep (cursors,
/// settings, mentions and recalls above the cursor).
pub async fn truth(url: &str, tenant: &str, users: &[String], limits: Limits) -> Result<Truth, Error> {
    if users.is_empty() {
        return Ok(Truth { rows: Vec::new(), partial: HashSet::new() });
    }
    let wanted = limits.held();
    let (ranked, mut partial) = read(url, tenant, users, Window::First(wanted)).await?;
    let mut per_user: HashMap<String, u64> = HashMap::new();
    let mut rows: Vec<TruthRow> = ranked
        .into_iter()
        .map(|(row, rank)| {
            *per_user.entry(row.user.clone()).or_default() += 1;
            let listed = (rank <= u64::from(limits.max_conversations) || row.pinned) && row.last_seq > 0;
            TruthRow { listed, ..row }
        })
        .collect();
    // Users the truth cannot give whole: Redis must not drop, nor build
    // afresh, a conversation of theirs the truth did not give.
    partial.extend(per_user.into_iter().filter(|(_, n)| *n >= wanted).map(|(user, _)| user));
    rows.sort_by(|a, b| b.order().cmp(&a.order()));
    Ok(Truth { rows, partial })
}

/// One conversation of a user whose truth [`truth`] could not give whole
/// (see [`Truth::partial`]), for an answer about that conversation: a row
/// beyond the ones `truth` gives is in neither the list nor what is kept,
/// so it is never `listed`. None: the user is no member of it.
pub async fn beyond_the_rows(
    url: &str,
    tenant: &str,
    user: &str,
    conversation: &str,
) -> Result<Option<TruthRow>, Error> {
    let (rows, _) = read(url, tenant, std::slice::from_ref(&user.to_string()), Window::Only(conversation)).await?;
    Ok(rows.into_iter().next().map(|(row, _)| row))
}

/// Every conversation of `users` beyond the rows [`truth`] gives them (the
/// users it could not give whole): never listed, in no particular order.
pub async fn all_beyond_the_rows(
    url: &str,
    tenant: &str,
    users: &[String],
    limits: Limits,
) -> Result<Vec<TruthRow>, Error> {
    if users.is_empty() {
        return Ok(Vec::new());
    }
    let (rows, _) = read(url, tenant, users, Window::Beyond(limits.held())).await?;
    Ok(rows.into_iter().map(|(row, _)| row).collect())
}

/// Which of each user's conversations, in list order, a read takes.
#[derive(Clone, Copy)]
enum Window<'a> {
    /// The first so many.
    First(u64),
    /// All after the first so many.
    Beyond(u64),
    /// This one conversation.
    Only(&'a str),
}

/// The conversations of each of `users` in the `window`, each with its
/// rank in list order and its marks (not `listed`: that depends on the
/// rank, for the caller to say); and the users one of whose rows could not
/// be read.
async fn read(
    url: &str,
    tenant: &str,
    users: &[String],
    window: Window<'_>,
) -> Result<(Vec<(TruthRow, u64)>, HashSet<String>), Error> {
    let rows =
        query_built(url, |store| heads_statement(store, tenant, users, window)).await.map_err(|error| match error {
            // A column of a type the driver cannot give (a raw TIMESTAMPTZ or
            // DATETIME last_ts, say) fails the whole statement: say where to look.
            Error::Unavailable(reason) => Error::Unavailable(format!(
                "{reason} (reading the app's views unread_conversation_heads and unread_memberships: \
             see docs/schema/ for the columns' types)"
            )),
            other => other,
        })?;
    let mut unreadable: HashSet<String> = HashSet::new();
    let mut rows: Vec<(TruthRow, u64)> = rows
        .into_iter()
        .filter_map(|row| {
            let user = match row.first() {
                Some(Value::Text(user)) => Some(user.clone()),
                _ => None,
            };
            match truth_row(row) {
                Ok(ranked) => Some(ranked),
                // One bad row of the app's views must not stop every answer of its user.
                Err(problem) => {
                    eprintln!("unread: warning: skipped a row of tenant={tenant}'s views: {problem}");
                    match user {
                        Some(user) => unreadable.extend([user]),
                        None => unreadable.extend(users.iter().cloned()),
                    }
                    None
                }
            }
        })
        .collect();
    let only = match window {
        Window::Only(conversation) => Some(conversation),
        Window::First(_) | Window::Beyond(_) => None,
    };
    let marks = marks(url, tenant, users, only).await?;
    for (row, _) in &mut rows {
        let key = (row.user.clone(), row.conversation.clone());
        let (mut mentions, mut recalled) = marks.get(&key).cloned().unwrap_or_default();
        recalled.sort_unstable();
        recalled.dedup();
        mentions.retain(|s| !recalled.contains(s));
        mentions.sort_unstable();
        mentions.dedup();
        (row.mentions, row.recalled) = (mentions, recalled);
    }
    Ok((rows, unreadable))
}

/// (mention seqs, recalled seqs) above each (user, conversation)'s cursor.
type Marks = HashMap<(String, String), (Vec<u64>, Vec<u64>)>;

async fn marks(url: &str, tenant: &str, users: &[String], conversation: Option<&str>) -> Result<Marks, Error> {
    let mut marks = Marks::new();
    for row in query_built(url, |store| marks_statement(store, tenant, users, conversation)).await? {
        let mut values = row.into_iter();
        let mut next_text = || match values.next() {
            Some(Value::Text(t)) => Ok(t),
            _ => Err(malformed("unread_recalls / unread_mentions")),
        };
        let (kind, user, conversation) = (next_text()?, next_text()?, next_text()?);
        let seq = match values.next() {
            Some(Value::Int(n)) if n > 0 => n as u64,
            _ => return Err(malformed("seq")),
        };
        let entry = marks.entry((user, conversation)).or_default();
        match kind.as_str() {
            "r" => entry.1.push(seq),
            _ => entry.0.push(seq),
        }
    }
    Ok(marks)
}

/// The users' member conversations in list order (pinned, then newest; one
/// without messages last; ties by conversation id, byte by byte, as Redis
/// orders a sorted set's equal scores), those of each user in the `window`
/// with their rank; with its parameters in the order its placeholders occur.
///
/// The app's views may compare ids through a case-insensitive collation
/// (MySQL's default): there `bob` would also read `Bob`'s rows, and `c1`
/// would join `C1`'s head. unread's ids are exact bytes, so on MySQL each
/// match is made again on the binary values (the plain comparisons stay
/// for the views' indexes), and ranks and ties go by the binary values.
fn heads_statement(store: &Store, tenant: &str, users: &[String], window: Window<'_>) -> (String, Vec<Param>) {
    let mut params = Vec::new();
    let mut p = |param: Param| {
        params.push(param);
        store.placeholder(params.len())
    };
    let tenant_at = p(text(tenant));
    let user_list = users.iter().map(|user| p(text(user))).collect::<Vec<_>>().join(", ");
    let (as_text, exact) = match store {
        Store::Mysql(_) => ("CAST(h.preview AS CHAR)", true),
        Store::Postgres(_) => ("h.preview::text", false),
    };
    let (user_key, tenant_key, conversation_key) =
        (as_key(store, "m.user_id"), as_key(store, "m.tenant"), as_key(store, "m.conversation"));
    // Tie order by bytes: binary values on MySQL, the C collation on PostgreSQL.
    let conversation_order = if exact { conversation_key.clone() } else { "m.conversation::text COLLATE \"C\"".into() };
    let (same_head, same_member) = if exact {
        let same_tenant = exactly(store, &mut p, [("m.tenant", &text(tenant))]);
        let exact_users = users.iter().map(|user| p(text(user))).collect::<Vec<_>>().join(", ");
        let (head_tenant, head_conversation) = (as_key(store, "h.tenant"), as_key(store, "h.conversation"));
        (
            format!(" AND {head_tenant} = {tenant_key} AND {head_conversation} = {conversation_key}"),
            format!("{same_tenant} AND {user_key} IN ({exact_users})"),
        )
    } else {
        (String::new(), String::new())
    };
    // In the order the placeholders occur (MySQL's are positional).
    let only = match window {
        Window::Only(c) => {
            let at = p(text(c));
            let same = exactly(store, &mut p, [("m.conversation", &text(c))]);
            format!(" AND m.conversation = {at}{same}")
        }
        Window::First(_) | Window::Beyond(_) => String::new(),
    };
    let ranks = match window {
        Window::First(wanted) => format!("rn <= {}", p(Param::Int(wanted as i64))),
        Window::Beyond(wanted) => format!("rn > {}", p(Param::Int(wanted as i64))),
        Window::Only(_) => "rn = 1".to_string(),
    };
    // A sender has read their own message, even when its touch (which moves
    // their cursor) never came.
    let read = if super::heads_name_last_sender() {
        format!(
            "CASE WHEN {} = {user_key} THEN GREATEST(COALESCE(r.read_seq, 0), h.last_seq) \
              ELSE COALESCE(r.read_seq, 0) END",
            as_key(store, "h.last_sender")
        )
    } else {
        "COALESCE(r.read_seq, 0)".to_string()
    };
    let statement = format!(
        "SELECT user_id, conversation, category, last_seq, last_ts, preview, read_seq, muted, pinned, marked_unread, rn, \
                large \
         FROM (\
           SELECT {user_key} AS user_id, m.conversation AS conversation, \
                  CASE WHEN h.last_seq IS NULL THEN '' ELSE COALESCE(h.category, 'chat') END AS category, \
                  COALESCE(h.last_seq, 0) AS last_seq, COALESCE(h.last_ts, 0) AS last_ts, {as_text} AS preview, \
                  {read} AS read_seq, COALESCE(r.muted, 0) AS muted, \
                  COALESCE(r.pinned, 0) AS pinned, COALESCE(r.marked_unread, 0) AS marked_unread, \
                  ROW_NUMBER() OVER (PARTITION BY {user_key} ORDER BY COALESCE(r.pinned, 0) DESC, \
                    COALESCE(h.last_ts * 1000 + MOD(h.last_seq, 1000), -1) DESC, {conversation_order} DESC) AS rn, \
                  CASE WHEN g.conversation IS NULL THEN 0 ELSE 1 END AS large \
           FROM unread_memberships m \
           LEFT JOIN unread_conversation_heads h \
             ON h.tenant = m.tenant AND h.conversation = m.conversation AND h.last_seq > 0{same_head} \
           LEFT JOIN unread_read_cursors r \
             ON r.tenant = m.tenant AND r.user_id = m.user_id AND r.conversation = m.conversation \
           LEFT JOIN unread_large_conversations g ON g.tenant = m.tenant AND g.conversation = m.conversation \
           WHERE m.tenant = {tenant_at} AND m.user_id IN ({user_list}){same_member}{only}\
         ) t WHERE {ranks}",
    );
    (statement, params)
}

/// (kind 'r' | 'm', user, conversation, seq) of the users' member
/// conversations (or only `conversation`), above each user's cursor (a
/// mention never counts for its sender); with its parameters in the order
/// its placeholders occur.
fn marks_statement(store: &Store, tenant: &str, users: &[String], conversation: Option<&str>) -> (String, Vec<Param>) {
    let mut params = Vec::new();
    let mut p = |param: Param| {
        params.push(param);
        store.placeholder(params.len())
    };
    let mut scope = |marks: &str| {
        let tenant_at = p(text(tenant));
        let list = users.iter().map(|user| p(text(user))).collect::<Vec<_>>().join(", ");
        let only = conversation.map(|c| format!(" AND {marks}.conversation = {}", p(text(c)))).unwrap_or_default();
        format!("{marks}.tenant = {tenant_at} AND m.user_id IN ({list}){only}")
    };
    let cursor = "LEFT JOIN unread_read_cursors r \
                    ON r.tenant = m.tenant AND r.user_id = m.user_id AND r.conversation = m.conversation";
    let recalls = format!(
        "SELECT 'r' AS kind, {} AS user_id, {} AS conversation, x.seq AS seq FROM unread_recalls x \
           JOIN unread_memberships m ON m.tenant = x.tenant AND m.conversation = x.conversation {cursor} \
           WHERE {} AND x.seq > COALESCE(r.read_seq, 0)",
        as_key(store, "m.user_id"),
        as_key(store, "x.conversation"),
        scope("x"),
    );
    let mentions = format!(
        "SELECT 'm', {}, {}, y.seq FROM unread_mentions y \
           JOIN unread_memberships m ON m.tenant = y.tenant AND m.conversation = y.conversation \
             AND (y.user_id = m.user_id OR y.user_id = '*') {cursor} \
           WHERE {} AND y.seq > COALESCE(r.read_seq, 0) AND y.sender <> m.user_id",
        as_key(store, "m.user_id"),
        as_key(store, "y.conversation"),
        scope("y"),
    );
    (format!("{recalls} UNION ALL {mentions}"), params)
}

/// A row of [`heads_statement`] and its rank; or what is wrong with it, with
/// the column named.
fn truth_row(row: Vec<Value>) -> Result<(TruthRow, u64), String> {
    let mut values = row.into_iter();
    let text = |value: Option<Value>, column: &str| match value {
        Some(Value::Text(t)) => Ok(t),
        other => Err(format!("column {column} is {other:?}, not text")),
    };
    let user = text(values.next(), "user_id")?;
    let conversation = text(values.next(), "conversation")?;
    let problem = |column: &str, what: &str| format!("user {user:?}, conversation {conversation:?}: {column} {what}");
    let number = |value: Option<Value>, column: &str| match value {
        Some(Value::Int(n)) if n >= 0 => Ok(n as u64),
        other => Err(problem(column, &format!("is {other:?}, not a whole number of at least 0"))),
    };
    let category = match values.next() {
        Some(Value::Text(t)) => t,
        other => return Err(problem("category", &format!("is {other:?}, not text"))),
    };
    let last_seq = number(values.next(), "last_seq")?;
    let ts = number(values.next(), "last_ts")?;
    let preview = match values.next() {
        Some(Value::Text(t)) => compact_preview(&t),
        Some(Value::Null) => "{}".to_string(),
        other => return Err(problem("preview", &format!("is {other:?}, not JSON text"))),
    };
    let read_seq = number(values.next(), "read_seq")?;
    let muted = number(values.next(), "muted")? == 1;
    let pinned = number(values.next(), "pinned")? == 1;
    let marked_unread = number(values.next(), "marked_unread")? == 1;
    let rank = number(values.next(), "rank")?;
    let large = number(values.next(), "large")? == 1;
    let row = TruthRow {
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
        listed: false,
        large,
    };
    Ok((row, rank))
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

    #[test]
    fn previews_are_compacted_like_touch_stores_them() {
        assert_eq!(compact_preview("{ \"b\": 1,  \"a\": \"x\" }"), r#"{"b":1,"a":"x"}"#);
        assert_eq!(compact_preview("not json"), "{}");
    }

    #[test]
    fn counts_take_marks_between_the_cursor_and_the_last_message() {
        let row = TruthRow { recalled: vec![3, 9], mentions: vec![4, 5], ..TruthRow::sample() };
        let counts = row.counts();
        assert_eq!((counts.mentions, counts.recalled), (2, 1));
        assert_eq!(counts.counted().unread, 2);
    }
}
