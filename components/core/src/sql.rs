//! The SQL message store: the truth behind every count.
//!
//! The app owns its messages and gives unread two read-only views,
//! `unread_conversation_heads (tenant, conversation, last_seq, last_ts,
//! category, preview)` and `unread_memberships (tenant, conversation,
//! user_id)`. unread owns `unread_read_cursors` (see `sql/*.sql`), created
//! idempotently when an instance first connects. MySQL / MariaDB or
//! PostgreSQL, chosen by the scheme of `sql_url`; empty means cache-only.

use spin_sdk::{mysql, pg};

use crate::Error;
use crate::cached::{Slot, with_connection};

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
}

impl TruthRow {
    pub fn unread(&self) -> u64 {
        self.last_seq.saturating_sub(self.read_seq)
    }

    /// The list score, as the scripts compute it (seed 000).
    pub fn score(&self) -> u64 {
        self.ts * 1000 + self.last_seq % 1000
    }
}

enum Store {
    Mysql(mysql::Connection),
    Postgres(pg::Connection),
}

#[derive(Clone)]
enum Param {
    Text(String),
    Int(i64),
}

enum Value {
    Int(i64),
    Text(String),
    Null,
}

thread_local! {
    static CONNECTION: Slot<Store> = const { Slot::new(None) };
}

const MIGRATION_MYSQL: &str = include_str!("sql/mysql.sql");
const MIGRATION_POSTGRES: &str = include_str!("sql/postgres.sql");

/// The store's address, or None when unread runs cache-only.
pub async fn configured() -> Option<String> {
    spin_sdk::variables::get("sql_url").await.ok().map(|u| u.trim().to_string()).filter(|u| !u.is_empty())
}

/// Moves a read cursor forward in SQL (never back): `GREATEST`.
pub async fn advance_cursor(url: &str, tenant: &str, user: &str, conversation: &str, seq: u64) -> Result<(), Error> {
    let params = vec![text(tenant), text(user), text(conversation), Param::Int(seq as i64), Param::Int(now_ms())];
    execute(url, advance_statement, params).await
}

/// Removes a conversation's read cursors (it was deleted).
pub async fn forget_conversation(url: &str, tenant: &str, conversation: &str) -> Result<(), Error> {
    let params = vec![text(tenant), text(conversation)];
    let statement = |store: &Store| {
        format!("DELETE FROM unread_read_cursors WHERE tenant = {} AND conversation = {}", store.placeholder(1), store.placeholder(2))
    };
    execute(url, statement, params).await
}

/// The newest `max_conversations` conversations of each of `users`, with
/// their read cursors: the truth to compare Redis with.
pub async fn truth(url: &str, tenant: &str, users: &[String], max_conversations: u32) -> Result<Vec<TruthRow>, Error> {
    if users.is_empty() {
        return Ok(Vec::new());
    }
    let mut params = vec![text(tenant)];
    params.extend(users.iter().map(|u| text(u)));
    params.push(Param::Int(max_conversations.into()));
    let rows = query(url, |store| truth_statement(store, users.len()), params).await?;
    rows.into_iter().map(truth_row).collect()
}

/// The next `limit` users of a tenant with a membership, after `after`.
pub async fn members_after(url: &str, tenant: &str, after: &str, limit: u32) -> Result<Vec<String>, Error> {
    let params = vec![text(tenant), text(after), Param::Int(limit.into())];
    let rows = query(url, walk_statement, params).await?;
    rows.into_iter()
        .map(|mut row| match row.pop() {
            Some(Value::Text(user)) => Ok(user),
            _ => Err(malformed("user_id")),
        })
        .collect()
}

async fn execute(url: &str, statement: impl Fn(&Store) -> String, params: Vec<Param>) -> Result<(), Error> {
    let operation = |store: std::rc::Rc<Store>| {
        let (statement, params) = (statement(&store), params.clone());
        async move { store.execute(&statement, params).await }
    };
    with_connection(&CONNECTION, || Store::open(url), operation).await.map_err(unavailable)
}

async fn query(url: &str, statement: impl Fn(&Store) -> String, params: Vec<Param>) -> Result<Vec<Vec<Value>>, Error> {
    let operation = |store: std::rc::Rc<Store>| {
        let (statement, params) = (statement(&store), params.clone());
        async move { store.query(&statement, params).await }
    };
    with_connection(&CONNECTION, || Store::open(url), operation).await.map_err(unavailable)
}

fn unavailable(error: String) -> Error {
    Error::Unavailable(format!("sql: {error}"))
}

fn text(value: &str) -> Param {
    Param::Text(value.to_string())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn malformed(what: &str) -> Error {
    Error::Unavailable(format!("sql: unexpected value for {what}"))
}

fn advance_statement(store: &Store) -> String {
    match store {
        // updated_at first: MySQL assigns left to right.
        Store::Mysql(_) => "INSERT INTO unread_read_cursors (tenant, user_id, conversation, read_seq, updated_at) \
             VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE \
             updated_at = IF(VALUES(read_seq) > read_seq, VALUES(updated_at), updated_at), \
             read_seq = GREATEST(read_seq, VALUES(read_seq))"
            .into(),
        Store::Postgres(_) => "INSERT INTO unread_read_cursors AS c (tenant, user_id, conversation, read_seq, updated_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant, user_id, conversation) DO UPDATE SET \
             read_seq = GREATEST(c.read_seq, EXCLUDED.read_seq), \
             updated_at = CASE WHEN EXCLUDED.read_seq > c.read_seq THEN EXCLUDED.updated_at ELSE c.updated_at END"
            .into(),
    }
}

fn truth_statement(store: &Store, users: usize) -> String {
    let user_list = (0..users).map(|i| store.placeholder(i + 2)).collect::<Vec<_>>().join(", ");
    let (as_text, as_key) = match store {
        Store::Mysql(_) => ("CAST(h.preview AS CHAR)", "CAST(m.user_id AS BINARY)"),
        Store::Postgres(_) => ("h.preview::text", "m.user_id"),
    };
    format!(
        "SELECT user_id, conversation, category, last_seq, last_ts, preview, read_seq FROM (\
           SELECT {as_key} AS user_id, h.conversation AS conversation, h.category AS category, \
                  h.last_seq AS last_seq, h.last_ts AS last_ts, {as_text} AS preview, \
                  COALESCE(r.read_seq, 0) AS read_seq, \
                  ROW_NUMBER() OVER (PARTITION BY m.user_id \
                    ORDER BY h.last_ts * 1000 + MOD(h.last_seq, 1000) DESC, h.conversation DESC) AS rn \
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

fn walk_statement(store: &Store) -> String {
    match store {
        Store::Mysql(_) => "SELECT DISTINCT CAST(user_id AS BINARY) AS u FROM unread_memberships \
             WHERE tenant = ? AND CAST(user_id AS BINARY) > ? ORDER BY u LIMIT ?"
            .into(),
        Store::Postgres(_) => "SELECT DISTINCT user_id FROM unread_memberships \
             WHERE tenant = $1 AND user_id > $2 ORDER BY user_id LIMIT $3"
            .into(),
    }
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
    let mut numbers = values.by_ref().take(2).map(|v| match v {
        Value::Int(n) if n >= 0 => Ok(n as u64),
        _ => Err(malformed("last_seq / last_ts")),
    });
    let last_seq = numbers.next().ok_or_else(|| malformed("last_seq"))??;
    let ts = numbers.next().ok_or_else(|| malformed("last_ts"))??;
    let preview = match values.next() {
        Some(Value::Text(t)) => compact_preview(&t),
        Some(Value::Null) => "{}".to_string(),
        _ => return Err(malformed("preview")),
    };
    let read_seq = match values.next() {
        Some(Value::Int(n)) if n >= 0 => n as u64,
        _ => return Err(malformed("read_seq")),
    };
    Ok(TruthRow { user, conversation, category, last_seq, read_seq, ts, preview })
}

/// The preview as touch stores it: compact JSON (order kept).
fn compact_preview(text: &str) -> String {
    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
        .ok()
        .and_then(|object| serde_json::to_string(&object).ok())
        .unwrap_or_else(|| "{}".to_string())
}

impl Store {
    async fn open(url: &str) -> Result<Store, String> {
        let store = if url.starts_with("mysql://") {
            Store::Mysql(mysql::Connection::open(url).await.map_err(|e| e.to_string())?)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Store::Postgres(pg::Connection::open(url).await.map_err(|e| e.to_string())?)
        } else {
            return Err("sql_url must start with mysql:// or postgres://".into());
        };
        store.migrate().await?;
        Ok(store)
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
        Ok(())
    }

    fn placeholder(&self, n: usize) -> String {
        match self {
            Store::Mysql(_) => "?".into(),
            Store::Postgres(_) => format!("${n}"),
        }
    }

    async fn execute(&self, statement: &str, params: Vec<Param>) -> Result<(), String> {
        match self {
            Store::Mysql(c) => c.execute(statement, params.into_iter().map(Param::mysql).collect::<Vec<_>>()).await.map_err(|e| format!("{e:?}")),
            Store::Postgres(c) => c.execute(statement, params.into_iter().map(Param::postgres).collect::<Vec<_>>()).await.map(|_| ()).map_err(|e| e.to_string()),
        }
    }

    async fn query(&self, statement: &str, params: Vec<Param>) -> Result<Vec<Vec<Value>>, String> {
        match self {
            Store::Mysql(c) => {
                let result = c.query(statement, params.into_iter().map(Param::mysql).collect::<Vec<_>>()).await.map_err(|e| e.to_string())?;
                let (_, rows, done) = result.into_inner();
                let rows = rows.collect().await;
                done.await.map_err(|e| format!("{e:?}"))?;
                Ok(rows.into_iter().map(|row| row.into_iter().map(Value::from_mysql).collect()).collect())
            }
            Store::Postgres(c) => {
                let result = c.query(statement, params.into_iter().map(Param::postgres).collect::<Vec<_>>()).await.map_err(|e| e.to_string())?;
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
    let without_comments: String = script.lines().filter(|l| !l.trim_start().starts_with("--")).collect::<Vec<_>>().join("\n");
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
        assert_eq!(statements(MIGRATION_MYSQL).len(), 1);
        assert_eq!(statements(MIGRATION_POSTGRES).len(), 2);
        assert!(statements(MIGRATION_POSTGRES).iter().all(|s| s.starts_with("CREATE")));
    }

    #[test]
    fn previews_are_compacted_like_touch_stores_them() {
        assert_eq!(compact_preview("{ \"b\": 1,  \"a\": \"x\" }"), r#"{"b":1,"a":"x"}"#);
        assert_eq!(compact_preview("not json"), "{}");
    }
}
