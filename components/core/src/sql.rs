//! The SQL message store: the truth behind every count.
//!
//! The app owns its messages and gives unread two read-only views,
//! `unread_conversation_heads (tenant, conversation, last_seq, last_ts,
//! category, preview)` and `unread_memberships (tenant, conversation,
//! user_id)`. unread owns `unread_read_cursors` (see `sql/*.sql`), created
//! idempotently when an instance first connects. MySQL / MariaDB or
//! PostgreSQL, chosen by the scheme of `sql_url`; empty means cache-only.

use std::time::Duration;

use spin_sdk::{mysql, pg};

use crate::cached::{Slot, with_connection, within};
use crate::{Error, config};

mod member;
mod truth;
pub use member::{Permit, read_as_member, setting_permit};
pub use truth::{Truth, TruthRow, all_beyond_the_rows, beyond_the_rows, truth};

enum Store {
    Mysql(Mysql),
    Postgres(pg::Connection),
}

/// A MySQL or MariaDB connection, and whether the server takes `INSERT ...
/// RETURNING` (MariaDB does; MySQL does not).
struct Mysql {
    connection: mysql::Connection,
    returning: bool,
}

#[derive(Clone)]
enum Param {
    Text(String),
    Int(i64),
}

#[derive(Debug)]
enum Value {
    Int(i64),
    Text(String),
    Null,
}

thread_local! {
    static CONNECTION: Slot<Store> = const { Slot::new(None) };
    /// Whether the heads view of the store connected to names each
    /// conversation's `last_sender` (read when the connection opens).
    static HEADS_NAME_LAST_SENDER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the app's heads view names the sender of each conversation's
/// last message (the optional `last_sender` column).
fn heads_name_last_sender() -> bool {
    HEADS_NAME_LAST_SENDER.get()
}

const MIGRATION_MYSQL: &str = include_str!("sql/mysql.sql");
const MIGRATION_POSTGRES: &str = include_str!("sql/postgres.sql");
const WIDEN_MYSQL: &str = include_str!("sql/mysql-widen.sql");

/// The store's address, or None when unread runs cache-only (`sql_url`
/// empty, or not declared by the component). A variable that cannot be read
/// is an error: a request must not silently run cache-only.
pub async fn configured() -> Result<Option<String>, Error> {
    Ok(config::text("sql_url").await?.map(|u| u.trim().to_string()).filter(|u| !u.is_empty()))
}

/// Moves the sender's read cursor to their message (never back), and
/// answers whether the store still holds their mark-unread then: the message
/// clears it only if it moved the cursor, so a message sent again, or one
/// the cursor had passed when the sender marked the conversation, leaves it.
pub async fn sent(url: &str, tenant: &str, sender: &str, conversation: &str, seq: u64) -> Result<bool, Error> {
    let now = crate::now_ms() as i64;
    let params = vec![text(tenant), text(sender), text(conversation), Param::Int(seq as i64), Param::Int(now)];
    let rows = query(
        url,
        |store| {
            let statement = advance_statement(store, 1, MarkUnread::ClearsIfAdvanced);
            format!("{statement}{}", cursor_returning(store, "marked_unread"))
        },
        params,
    )
    .await?;
    let column = Setting::MarkedUnread.column();
    let row = match rows.into_iter().next() {
        Some(row) => row,
        // MySQL answers no rows to an upsert: the row is there now.
        None => cursor_column(url, tenant, sender, conversation, column).await?.ok_or_else(|| malformed(column))?,
    };
    setting_of(&row, column)
}

/// Moves many (user, conversation, seq) read cursors forward in one
/// statement; a mark-unread flag goes with any read.
pub async fn advance_cursors(url: &str, tenant: &str, cursors: &[(String, String, u64)]) -> Result<(), Error> {
    upsert_cursors(url, tenant, cursors, MarkUnread::Clears).await
}

/// Like [`advance_cursors`], for members who joined: the members' own
/// mark-unread flags stay (a replayed join changes nothing they set).
pub async fn join_cursors(url: &str, tenant: &str, cursors: &[(String, String, u64)]) -> Result<(), Error> {
    upsert_cursors(url, tenant, cursors, MarkUnread::Keeps).await
}

async fn upsert_cursors(
    url: &str,
    tenant: &str,
    cursors: &[(String, String, u64)],
    mark: MarkUnread,
) -> Result<(), Error> {
    let now = crate::now_ms() as i64;
    for cursors in cursors.chunks(ROWS_PER_STATEMENT) {
        let params = cursors
            .iter()
            .flat_map(|(user, conversation, seq)| {
                [text(tenant), text(user), text(conversation), Param::Int(*seq as i64), Param::Int(now)]
            })
            .collect();
        execute(url, |store| advance_statement(store, cursors.len(), mark), params).await?;
    }
    Ok(())
}

/// Removes what unread recorded of members who left a conversation.
pub async fn forget_members(url: &str, tenant: &str, conversation: &str, users: &[String]) -> Result<(), Error> {
    if users.is_empty() {
        return Ok(());
    }
    for table in ["unread_read_cursors", "unread_mentions"] {
        let statement = |store: &Store| {
            let users = (0..users.len()).map(|i| store.placeholder(i + 3)).collect::<Vec<_>>().join(", ");
            format!(
                "DELETE FROM {table} WHERE tenant = {} AND conversation = {} AND user_id IN ({users})",
                store.placeholder(1),
                store.placeholder(2)
            )
        };
        let mut params = vec![text(tenant), text(conversation)];
        params.extend(users.iter().map(|u| text(u)));
        execute(url, statement, params).await?;
    }
    Ok(())
}

/// A user whose write reached the SQL store while Redis was unreachable.
#[derive(Debug, PartialEq, Eq)]
pub struct Stale {
    pub tenant: String,
    pub user: String,
    since: i64,
}

/// Marks a user whose write reached only the SQL store: Redis still holds
/// what it had before, so the next Redis connection makes the user's next
/// read rebuild from the truth (see `redis::open`).
pub async fn mark_stale(url: &str, tenant: &str, user: &str) -> Result<(), Error> {
    let params = vec![text(tenant), text(user), Param::Int(crate::now_ms() as i64)];
    execute(url, |store| insert_new(store, "unread_stale_users (tenant, user_id, since)", 3, 1), params).await
}

/// How many stale marks [`stale_users`] reads at a time.
pub const STALE_BATCH: usize = 100;

/// Users marked stale, oldest first, [`STALE_BATCH`] at a time.
pub async fn stale_users(url: &str) -> Result<Vec<Stale>, Error> {
    let statement = |store: &Store| match store {
        Store::Mysql(_) => format!(
            "SELECT CAST(tenant AS CHAR), CAST(user_id AS CHAR), since FROM unread_stale_users \
             ORDER BY since LIMIT {STALE_BATCH}"
        ),
        Store::Postgres(_) => {
            format!("SELECT tenant, user_id, since FROM unread_stale_users ORDER BY since LIMIT {STALE_BATCH}")
        }
    };
    let rows = query(url, statement, Vec::new()).await?;
    rows.into_iter()
        .map(|row| match <[Value; 3]>::try_from(row) {
            Ok([Value::Text(tenant), Value::Text(user), Value::Int(since)]) => Ok(Stale { tenant, user, since }),
            _ => Err(malformed("unread_stale_users")),
        })
        .collect()
}

/// Removes stale marks that were applied (a mark renewed meanwhile stays).
pub async fn forget_stale(url: &str, stale: &[Stale]) -> Result<(), Error> {
    for mark in stale {
        let statement = |store: &Store| {
            format!(
                "DELETE FROM unread_stale_users WHERE tenant = {} AND user_id = {} AND since = {}",
                store.placeholder(1),
                store.placeholder(2),
                store.placeholder(3)
            )
        };
        execute(url, statement, vec![text(&mark.tenant), text(&mark.user), Param::Int(mark.since)]).await?;
    }
    Ok(())
}

/// Removes everything unread recorded of a conversation (it was deleted).
pub async fn forget_conversation(url: &str, tenant: &str, conversation: &str) -> Result<(), Error> {
    for table in ["unread_read_cursors", "unread_recalls", "unread_mentions", "unread_large_conversations"] {
        let statement = |store: &Store| {
            format!(
                "DELETE FROM {table} WHERE tenant = {} AND conversation = {}",
                store.placeholder(1),
                store.placeholder(2)
            )
        };
        execute(url, statement, vec![text(tenant), text(conversation)]).await?;
    }
    Ok(())
}

/// A per-user setting of a conversation: a column of `unread_read_cursors`.
#[derive(Clone, Copy, Debug)]
pub enum Setting {
    Muted,
    Pinned,
    MarkedUnread,
}

impl Setting {
    /// The setting's column in `unread_read_cursors`.
    fn column(self) -> &'static str {
        match self {
            Setting::Muted => "muted",
            Setting::Pinned => "pinned",
            Setting::MarkedUnread => "marked_unread",
        }
    }
}

/// One of a user's settings of a conversation as the truth holds it now;
/// `None` when the user has no row for it.
pub async fn setting(
    url: &str,
    tenant: &str,
    user: &str,
    conversation: &str,
    setting: Setting,
) -> Result<Option<bool>, Error> {
    let column = setting.column();
    cursor_column(url, tenant, user, conversation, column).await?.map(|row| setting_of(&row, column)).transpose()
}

/// A row that answered one setting's `column`: whether it is on.
fn setting_of(row: &[Value], column: &str) -> Result<bool, Error> {
    match row {
        [Value::Int(on)] => Ok(*on != 0),
        _ => Err(malformed(column)),
    }
}

/// Sets one of a user's settings of a conversation.
pub async fn set_setting(
    url: &str,
    tenant: &str,
    user: &str,
    conversation: &str,
    setting: Setting,
    on: bool,
) -> Result<(), Error> {
    let params =
        vec![text(tenant), text(user), text(conversation), Param::Int(on.into()), Param::Int(crate::now_ms() as i64)];
    execute(url, |store| setting_statement(store, setting), params).await
}

/// Records who a message mentions (`*`: every member but the sender).
pub async fn record_mentions(
    url: &str,
    tenant: &str,
    conversation: &str,
    seq: u64,
    sender: &str,
    users: &[String],
) -> Result<(), Error> {
    if users.is_empty() {
        return Ok(());
    }
    for users in users.chunks(ROWS_PER_STATEMENT) {
        let params = users
            .iter()
            .flat_map(|user| [text(tenant), text(conversation), Param::Int(seq as i64), text(user), text(sender)])
            .collect();
        let statement = |store: &Store| {
            insert_new(store, "unread_mentions (tenant, conversation, seq, user_id, sender)", 5, users.len())
        };
        execute(url, statement, params).await?;
    }
    Ok(())
}

/// Records that a conversation is large (read diffusion), before Redis
/// makes it so.
pub async fn record_large(url: &str, tenant: &str, conversation: &str) -> Result<(), Error> {
    let params = vec![text(tenant), text(conversation)];
    execute(url, |store| insert_new(store, "unread_large_conversations (tenant, conversation)", 2, 1), params).await
}

/// Records a recalled message.
pub async fn record_recall(url: &str, tenant: &str, conversation: &str, seq: u64) -> Result<(), Error> {
    let params = vec![text(tenant), text(conversation), Param::Int(seq as i64)];
    execute(url, |store| insert_new(store, "unread_recalls (tenant, conversation, seq)", 3, 1), params).await
}

/// A column's value as unread compares it: on MySQL its binary value (a
/// view's collation may ignore case and trailing spaces; unread's ids are
/// exact bytes), on PostgreSQL as it is.
fn as_key(store: &Store, column: &str) -> String {
    match store {
        Store::Mysql(_) => format!("CAST({column} AS BINARY)"),
        Store::Postgres(_) => column.to_string(),
    }
}

/// On MySQL, ` AND CAST(column AS BINARY) = value` for each pair, so that a
/// view's case-insensitive collation matches no other id (the plain
/// comparisons beside these keep the view's index in use); nothing on
/// PostgreSQL, which compares exactly.
fn exactly<const N: usize>(store: &Store, p: &mut impl FnMut(Param) -> String, pairs: [(&str, &Param); N]) -> String {
    match store {
        Store::Mysql(_) => pairs
            .iter()
            .map(|(column, value)| format!(" AND CAST({column} AS BINARY) = {}", p((*value).clone())))
            .collect(),
        Store::Postgres(_) => String::new(),
    }
}

/// Who a touch reaches, as the truth has it: which of `users` the
/// memberships view has in the conversation (a touch held back past a leave,
/// or naming someone by mistake, must not give a non-member the
/// conversation), the conversation's category in the heads view, if it
/// has a head (a touch in another category is refused before it writes),
/// and whether it is large. One statement per chunk of users; the first
/// also reads the head and largeness.
pub async fn audience(url: &str, tenant: &str, conversation: &str, users: &[String]) -> Result<Audience, Error> {
    let mut members = std::collections::HashSet::new();
    let (mut category, mut large) = (None, false);
    // At least one statement, so that the head is read even with no users.
    let chunks: Vec<&[String]> = if users.is_empty() { vec![&[]] } else { users.chunks(ROWS_PER_STATEMENT).collect() };
    for (i, users) in chunks.into_iter().enumerate() {
        let with_head = i == 0;
        let build = |store: &Store| {
            let mut params = Vec::new();
            let mut p = |param: Param| {
                params.push(param);
                store.placeholder(params.len())
            };
            let mut parts = Vec::new();
            if with_head {
                // One row of `kind`, `column` of `table`'s row of the conversation, if it has one.
                let mut of_conversation = |kind: &str, column: &str, table: &str| {
                    let (t, c) = (p(text(tenant)), p(text(conversation)));
                    let exact =
                        exactly(store, &mut p, [("tenant", &text(tenant)), ("conversation", &text(conversation))]);
                    format!(
                        "SELECT '{kind}' AS kind, {} AS value FROM {table} WHERE tenant = {t} \
                         AND conversation = {c}{exact}",
                        as_key(store, column)
                    )
                };
                parts.push(of_conversation("c", "COALESCE(category, 'chat')", "unread_conversation_heads"));
                parts.push(of_conversation("l", "conversation", "unread_large_conversations"));
            }
            if !users.is_empty() {
                let (t, c) = (p(text(tenant)), p(text(conversation)));
                let list = users.iter().map(|user| p(text(user))).collect::<Vec<_>>().join(", ");
                let exact = exactly(store, &mut p, [("tenant", &text(tenant)), ("conversation", &text(conversation))]);
                // The users come back as stored: the caller keeps the exact ones.
                parts.push(format!(
                    "SELECT DISTINCT 'm' AS kind, {} AS value FROM unread_memberships WHERE tenant = {t} \
                     AND conversation = {c} AND user_id IN ({list}){exact}",
                    as_key(store, "user_id")
                ));
            }
            (parts.join(" UNION ALL "), params)
        };
        for row in query_built(url, build).await? {
            match <[Value; 2]>::try_from(row) {
                Ok([Value::Text(kind), Value::Text(value)]) if kind == "m" => {
                    members.insert(value);
                }
                Ok([Value::Text(kind), Value::Text(value)]) if kind == "c" => category = Some(value),
                Ok([Value::Text(kind), Value::Text(_)]) if kind == "l" => large = true,
                _ => return Err(malformed("unread_memberships / unread_conversation_heads")),
            }
        }
    }
    Ok(Audience { members, category, large })
}

/// Who a touch reaches, as the truth has it (see [`audience`]).
pub struct Audience {
    /// The users named that are members.
    pub members: std::collections::HashSet<String>,
    /// The conversation's category, if it has a head.
    pub category: Option<String>,
    /// The conversation is large (read diffusion).
    pub large: bool,
}

/// Every member the memberships view has in a conversation.
pub async fn members_of(url: &str, tenant: &str, conversation: &str) -> Result<Vec<String>, Error> {
    let rows = query_built(url, |store| {
        let (tenant, conversation) = (text(tenant), text(conversation));
        let mut params = Vec::new();
        let mut p = |param: &Param| {
            params.push(param.clone());
            store.placeholder(params.len())
        };
        let (t, c) = (p(&tenant), p(&conversation));
        let exact = exactly(store, &mut |param| p(&param), [("tenant", &tenant), ("conversation", &conversation)]);
        let statement = format!(
            "SELECT DISTINCT {} FROM unread_memberships WHERE tenant = {t} AND conversation = {c}{exact}",
            as_key(store, "user_id")
        );
        (statement, params)
    })
    .await?;
    user_ids(rows)
}

/// The next `limit` users of a tenant with a membership, after `after`.
pub async fn members_after(url: &str, tenant: &str, after: &str, limit: u32) -> Result<Vec<String>, Error> {
    let params = vec![text(tenant), text(after), Param::Int(limit.into())];
    let rows = query(url, walk_statement, params).await?;
    user_ids(rows)
}

/// The user ids of rows of one `user_id` column.
fn user_ids(rows: Vec<Vec<Value>>) -> Result<Vec<String>, Error> {
    rows.into_iter()
        .map(|mut row| match row.pop() {
            Some(Value::Text(user)) => Ok(user),
            _ => Err(malformed("user_id")),
        })
        .collect()
}

async fn execute(url: &str, statement: impl Fn(&Store) -> String, params: Vec<Param>) -> Result<(), Error> {
    execute_built(url, |store| (statement(store), params.clone())).await
}

async fn query(url: &str, statement: impl Fn(&Store) -> String, params: Vec<Param>) -> Result<Vec<Vec<Value>>, Error> {
    query_built(url, |store| (statement(store), params.clone())).await
}

/// Runs the statement `build` writes for the store, with the parameters in
/// the order its placeholders occur (they differ between the dialects).
async fn execute_built(url: &str, build: impl Fn(&Store) -> (String, Vec<Param>)) -> Result<(), Error> {
    let operation = |store: std::rc::Rc<Store>| {
        let (statement, params) = build(&store);
        async move { store.execute(&statement, params).await }
    };
    in_time(with_connection(&CONNECTION, || Store::open(url), operation)).await
}

/// Like [`execute_built`], for a statement that answers rows.
async fn query_built(url: &str, build: impl Fn(&Store) -> (String, Vec<Param>)) -> Result<Vec<Vec<Value>>, Error> {
    let operation = |store: std::rc::Rc<Store>| {
        let (statement, params) = build(&store);
        async move { store.query(&statement, params).await }
    };
    in_time(with_connection(&CONNECTION, || Store::open(url), operation)).await
}

/// Whether the store answers `INSERT ... RETURNING` (PostgreSQL, MariaDB;
/// not MySQL).
async fn returning(url: &str) -> Result<bool, Error> {
    let operation = |store: std::rc::Rc<Store>| async move {
        Ok::<_, String>(match &*store {
            Store::Mysql(mysql) => mysql.returning,
            Store::Postgres(_) => true,
        })
    };
    in_time(with_connection(&CONNECTION, || Store::open(url), operation)).await
}

/// Whether the store answers `SELECT 1` within `deadline` (the health check;
/// a first call also connects and creates unread's tables, as any call does).
pub async fn ping(url: &str, deadline: Duration) -> Result<(), Error> {
    let operation = |store: std::rc::Rc<Store>| async move { store.query("SELECT 1", Vec::new()).await.map(drop) };
    in_time_of(deadline, with_connection(&CONNECTION, || Store::open(url), operation)).await
}

/// A SQL call waits at most this long (a truth read of 100 users included).
const DEADLINE: Duration = Duration::from_secs(10);

/// The call's result within [`DEADLINE`]; past it the connection is dropped.
async fn in_time<T>(call: impl std::future::Future<Output = Result<T, String>>) -> Result<T, Error> {
    in_time_of(DEADLINE, call).await
}

/// The call's result within `deadline`; past it the connection is dropped.
async fn in_time_of<T>(
    deadline: Duration,
    call: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, Error> {
    within(&CONNECTION, deadline, call)
        .await
        .unwrap_or_else(|| Err(format!("no answer within {} ms", deadline.as_millis())))
        .map_err(unavailable)
}

fn unavailable(error: String) -> Error {
    Error::Unavailable(format!("sql: {error}"))
}

fn text(value: &str) -> Param {
    Param::Text(value.to_string())
}

fn malformed(what: &str) -> Error {
    Error::Unavailable(format!("sql: unexpected value for {what}"))
}

/// `rows` parenthesised groups of `columns` placeholders.
fn value_rows(store: &Store, columns: usize, rows: usize) -> String {
    (0..rows)
        .map(|r| {
            format!("({})", (1..=columns).map(|c| store.placeholder(r * columns + c)).collect::<Vec<_>>().join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn advance_statement(store: &Store, rows: usize, mark: MarkUnread) -> String {
    format!(
        "INSERT INTO unread_read_cursors{} (tenant, user_id, conversation, read_seq, updated_at) VALUES {} {}",
        cursor_alias(store),
        value_rows(store, 5, rows),
        cursor_upsert(store, mark)
    )
}

/// How a cursor upsert names the row already there (`c`), on PostgreSQL.
fn cursor_alias(store: &Store) -> &'static str {
    match store {
        Store::Mysql(_) => "",
        Store::Postgres(_) => " AS c",
    }
}

/// What a read cursor upsert does to the mark-unread flag of a row already
/// there.
#[derive(Clone, Copy)]
enum MarkUnread {
    /// A read (the user's own, or a clear of a category) clears it.
    Clears,
    /// A join keeps it: a replayed join changes nothing the member set.
    Keeps,
    /// A message clears its sender's only if it moves their cursor.
    ClearsIfAdvanced,
}

/// What a read cursor upsert does to the row already there: the cursor
/// moves forward only, the mark-unread flag as `mark` says, and
/// `updated_at` moves only when something changed.
fn cursor_upsert(store: &Store, mark: MarkUnread) -> String {
    match store {
        // MySQL assigns left to right, each from the row as the assignments
        // before it left it: updated_at and the flag read the old cursor.
        Store::Mysql(_) => {
            let marked = match mark {
                MarkUnread::Clears => "0",
                MarkUnread::Keeps => "marked_unread",
                MarkUnread::ClearsIfAdvanced => "IF(VALUES(read_seq) > read_seq, 0, marked_unread)",
            };
            format!(
                "ON DUPLICATE KEY UPDATE \
                 updated_at = IF(VALUES(read_seq) > read_seq OR marked_unread <> {marked}, VALUES(updated_at), updated_at), \
                 marked_unread = {marked}, read_seq = GREATEST(read_seq, VALUES(read_seq))"
            )
        }
        Store::Postgres(_) => {
            let marked = match mark {
                MarkUnread::Clears => "0",
                MarkUnread::Keeps => "c.marked_unread",
                MarkUnread::ClearsIfAdvanced => {
                    "CASE WHEN EXCLUDED.read_seq > c.read_seq THEN 0 ELSE c.marked_unread END"
                }
            };
            format!(
                "ON CONFLICT (tenant, user_id, conversation) DO UPDATE SET \
                 read_seq = GREATEST(c.read_seq, EXCLUDED.read_seq), marked_unread = {marked}, \
                 updated_at = CASE WHEN EXCLUDED.read_seq > c.read_seq OR c.marked_unread <> {marked} \
                   THEN EXCLUDED.updated_at ELSE c.updated_at END"
            )
        }
    }
}

/// What a read cursor upsert appends to answer `column` of the row after
/// it; nothing on MySQL, which has no `RETURNING` (ask [`cursor_column`]).
fn cursor_returning(store: &Store, column: &str) -> String {
    match store {
        Store::Mysql(mysql) if mysql.returning => format!(" RETURNING {column}"),
        Store::Mysql(_) => String::new(),
        Store::Postgres(_) => format!(" RETURNING c.{column}"),
    }
}

/// One column of a user's read cursor row, as the store holds it (MySQL,
/// whose upsert answers no rows); `None` when there is no row.
async fn cursor_column(
    url: &str,
    tenant: &str,
    user: &str,
    conversation: &str,
    column: &'static str,
) -> Result<Option<Vec<Value>>, Error> {
    let rows = query_built(url, |store| {
        let (tenant, user, conversation) = (text(tenant), text(user), text(conversation));
        let mut params = Vec::new();
        let mut p = |param: &Param| {
            params.push(param.clone());
            store.placeholder(params.len())
        };
        let (t, u, c) = (p(&tenant), p(&user), p(&conversation));
        let exact = exactly(
            store,
            &mut |param| p(&param),
            [("tenant", &tenant), ("user_id", &user), ("conversation", &conversation)],
        );
        let statement = format!(
            "SELECT {column} FROM unread_read_cursors WHERE tenant = {t} AND user_id = {u} \
             AND conversation = {c}{exact}"
        );
        (statement, params)
    })
    .await?;
    Ok(rows.into_iter().next())
}

/// Upserts one setting; a new row starts with read cursor 0.
fn setting_statement(store: &Store, setting: Setting) -> String {
    let column = setting.column();
    let flag = match store {
        Store::Mysql(_) => "?".to_string(),
        // The parameter is an int8; the column a smallint.
        Store::Postgres(_) => "CAST(CAST($4 AS BIGINT) AS SMALLINT)".to_string(),
    };
    let [tenant, user, conversation, updated_at] = [1, 2, 3, 5].map(|n| store.placeholder(n));
    let insert = format!(
        "INSERT INTO unread_read_cursors (tenant, user_id, conversation, {column}, updated_at) \
         VALUES ({tenant}, {user}, {conversation}, {flag}, {updated_at})"
    );
    match store {
        Store::Mysql(_) => {
            format!("{insert} ON DUPLICATE KEY UPDATE {column} = VALUES({column}), updated_at = VALUES(updated_at)")
        }
        Store::Postgres(_) => format!(
            "{insert} ON CONFLICT (tenant, user_id, conversation) DO UPDATE SET {column} = EXCLUDED.{column}, updated_at = EXCLUDED.updated_at"
        ),
    }
}

/// Inserts rows, leaving those already there.
fn insert_new(store: &Store, table_and_columns: &str, columns: usize, rows: usize) -> String {
    let values = value_rows(store, columns, rows);
    match store {
        Store::Mysql(_) => format!("INSERT IGNORE INTO {table_and_columns} VALUES {values}"),
        Store::Postgres(_) => format!("INSERT INTO {table_and_columns} VALUES {values} ON CONFLICT DO NOTHING"),
    }
}

/// The next users of a tenant in the view's own order, so that the view's
/// index serves the walk (under a case-insensitive collation, user ids that
/// differ only in case are one user to the app, and to the walk).
fn walk_statement(store: &Store) -> String {
    match store {
        Store::Mysql(_) => "SELECT DISTINCT user_id FROM unread_memberships \
             WHERE tenant = ? AND user_id > ? ORDER BY user_id LIMIT ?"
            .into(),
        Store::Postgres(_) => "SELECT DISTINCT user_id FROM unread_memberships \
             WHERE tenant = $1 AND user_id > $2 ORDER BY user_id LIMIT $3"
            .into(),
    }
}

/// Rows of a multi-row statement per statement: far under every server's
/// placeholder limit (65 535) whatever the row width.
const ROWS_PER_STATEMENT: usize = 500;

/// Removes recalls and mentions no member can count any more: at or below
/// the cursor of every member (a mention: of the member it names), or of a
/// conversation nobody is a member of. Run when a reconcile walk completes.
pub async fn prune_marks(url: &str, tenant: &str) -> Result<(), Error> {
    let cursor = |user: &str, table: &str| {
        format!(
            "COALESCE((SELECT r.read_seq FROM unread_read_cursors r WHERE r.tenant = {table}.tenant \
               AND r.user_id = {user} AND r.conversation = {table}.conversation), 0)"
        )
    };
    let everyone = |table: &str| {
        format!(
            "COALESCE((SELECT MIN({}) FROM unread_memberships m WHERE m.tenant = {table}.tenant \
               AND m.conversation = {table}.conversation), {MAX})",
            cursor("m.user_id", table),
            MAX = crate::MAX_EXACT,
        )
    };
    let statements = [
        format!("DELETE FROM unread_recalls WHERE tenant = {{}} AND seq <= {}", everyone("unread_recalls")),
        format!(
            "DELETE FROM unread_mentions WHERE tenant = {{}} AND user_id = '*' AND seq <= {}",
            everyone("unread_mentions")
        ),
        format!(
            "DELETE FROM unread_mentions WHERE tenant = {{}} AND user_id <> '*' AND seq <= {}",
            cursor("unread_mentions.user_id", "unread_mentions")
        ),
    ];
    for statement in statements {
        execute(url, |store| statement.replace("{}", &store.placeholder(1)), vec![text(tenant)]).await?;
    }
    Ok(())
}

impl Store {
    async fn open(url: &str) -> Result<Store, String> {
        let store = if url.starts_with("mysql://") {
            let connection = mysql::Connection::open(url).await.map_err(|e| e.to_string())?;
            let mut store = Store::Mysql(Mysql { connection, returning: false });
            let version = store.query("SELECT VERSION()", Vec::new()).await?;
            let mariadb =
                matches!(version.first().and_then(|row| row.first()), Some(Value::Text(v)) if v.contains("MariaDB"));
            if let Store::Mysql(mysql) = &mut store {
                mysql.returning = mariadb;
            }
            store
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Store::Postgres(pg::Connection::open(url).await.map_err(|e| e.to_string())?)
        } else {
            return Err("sql_url must start with mysql:// or postgres://".into());
        };
        store.migrate().await?;
        let last_sender = store.heads_have_last_sender().await?;
        HEADS_NAME_LAST_SENDER.set(last_sender);
        Ok(store)
    }

    /// Whether the app's heads view has the optional `last_sender` column.
    async fn heads_have_last_sender(&self) -> Result<bool, String> {
        let schema = match self {
            Store::Mysql(_) => "TABLE_SCHEMA = DATABASE()",
            Store::Postgres(_) => "table_schema = ANY (current_schemas(false))",
        };
        let statement = format!(
            "SELECT COUNT(*) FROM information_schema.columns WHERE {schema} \
             AND table_name = 'unread_conversation_heads' AND column_name = 'last_sender'"
        );
        self.counts_any(&statement).await
    }

    /// Creates unread's table if missing. Another instance may be doing the
    /// same at this moment; if the table exists afterwards, that is success.
    async fn migrate(&self) -> Result<(), String> {
        let script = match self {
            Store::Mysql(_) => MIGRATION_MYSQL,
            Store::Postgres(_) => MIGRATION_POSTGRES,
        };
        for statement in statements(script) {
            if let Err(error) = self.execute(&statement, Vec::new()).await {
                self.query("SELECT read_seq FROM unread_read_cursors WHERE 1 = 0", Vec::new())
                    .await
                    .map_err(|_| format!("migration failed: {error}"))?;
            }
        }
        if matches!(self, Store::Mysql(_)) && self.has_narrow_identifiers().await? {
            for statement in statements(WIDEN_MYSQL) {
                self.execute(&statement, Vec::new()).await.map_err(|e| format!("widening identifiers failed: {e}"))?;
            }
        }
        Ok(())
    }

    /// Whether a MySQL table of unread's still has an identifier column
    /// narrower than 128 bytes (made before identifiers could be that long).
    async fn has_narrow_identifiers(&self) -> Result<bool, String> {
        self.counts_any(
            "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() \
             AND TABLE_NAME LIKE 'unread\\_%' AND DATA_TYPE = 'varbinary' AND CHARACTER_MAXIMUM_LENGTH < 128",
        )
        .await
    }

    /// Whether the `SELECT COUNT(*) ...` `statement` counts anything.
    async fn counts_any(&self, statement: &str) -> Result<bool, String> {
        Ok(match self.query(statement, Vec::new()).await?.first().and_then(|row| row.first()) {
            Some(Value::Int(count)) => *count > 0,
            Some(Value::Text(count)) => count != "0",
            _ => false,
        })
    }

    fn placeholder(&self, n: usize) -> String {
        match self {
            Store::Mysql(_) => "?".into(),
            Store::Postgres(_) => format!("${n}"),
        }
    }

    async fn execute(&self, statement: &str, params: Vec<Param>) -> Result<(), String> {
        match self {
            Store::Mysql(c) => c
                .connection
                .execute(statement, params.into_iter().map(Param::mysql).collect::<Vec<_>>())
                .await
                .map_err(|e| format!("{e:?}")),
            Store::Postgres(c) => c
                .execute(statement, params.into_iter().map(Param::postgres).collect::<Vec<_>>())
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
        }
    }

    async fn query(&self, statement: &str, params: Vec<Param>) -> Result<Vec<Vec<Value>>, String> {
        match self {
            Store::Mysql(c) => {
                let result = c
                    .connection
                    .query(statement, params.into_iter().map(Param::mysql).collect::<Vec<_>>())
                    .await
                    .map_err(|e| e.to_string())?;
                let (_, rows, done) = result.into_inner();
                let rows = rows.collect().await;
                done.await.map_err(|e| format!("{e:?}"))?;
                Ok(rows.into_iter().map(|row| row.into_iter().map(Value::from_mysql).collect()).collect())
            }
            Store::Postgres(c) => {
                let result = c
                    .query(statement, params.into_iter().map(Param::postgres).collect::<Vec<_>>())
                    .await
                    .map_err(|e| e.to_string())?;
                let (_, rows, done) = result.into_inner();
                let rows = rows.collect().await;
                done.await.map_err(|e| format!("{e:?}"))?;
                Ok(rows.into_iter().map(|row| row.into_iter().map(Value::from_postgres).collect()).collect())
            }
        }
    }
}

/// The statements of a migration file (`;`-separated, comments dropped).
fn statements(script: &str) -> Vec<String> {
    let without_comments: String =
        script.lines().filter(|l| !l.trim_start().starts_with("--")).collect::<Vec<_>>().join("\n");
    without_comments.split(';').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

impl Param {
    fn mysql(self) -> mysql::ParameterValue {
        match self {
            Param::Text(t) => mysql::ParameterValue::Str(t),
            Param::Int(n) => mysql::ParameterValue::Int64(n),
        }
    }

    fn postgres(self) -> pg::ParameterValue {
        match self {
            Param::Text(t) => pg::ParameterValue::Str(t),
            Param::Int(n) => pg::ParameterValue::Int64(n),
        }
    }
}

impl Value {
    fn from_mysql(value: mysql::DbValue) -> Value {
        use mysql::DbValue as V;
        match value {
            V::Int8(n) => Value::Int(n.into()),
            V::Int16(n) => Value::Int(n.into()),
            V::Int32(n) => Value::Int(n.into()),
            V::Int64(n) => Value::Int(n),
            V::Uint8(n) => Value::Int(n.into()),
            V::Uint16(n) => Value::Int(n.into()),
            V::Uint32(n) => Value::Int(n.into()),
            V::Uint64(n) => i64::try_from(n).map_or(Value::Null, Value::Int),
            V::Str(t) => Value::Text(t),
            V::Binary(b) => String::from_utf8(b).map_or(Value::Null, Value::Text),
            _ => Value::Null,
        }
    }

    fn from_postgres(value: pg::DbValue) -> Value {
        use pg::DbValue as V;
        match value {
            V::Int8(n) => Value::Int(n.into()),
            V::Int16(n) => Value::Int(n.into()),
            V::Int32(n) => Value::Int(n.into()),
            V::Int64(n) => Value::Int(n),
            V::Decimal(d) => d.parse().map_or(Value::Null, Value::Int),
            V::Str(t) => Value::Text(t),
            V::Binary(b) | V::Jsonb(b) => String::from_utf8(b).map_or(Value::Null, Value::Text),
            _ => Value::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_split_into_statements() {
        assert_eq!(statements(MIGRATION_MYSQL).len(), 5);
        assert_eq!(statements(MIGRATION_POSTGRES).len(), 6);
        assert!(statements(MIGRATION_POSTGRES).iter().all(|s| s.starts_with("CREATE")));
    }
}
