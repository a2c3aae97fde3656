//! The app's SQL message store, as an app would set it up: its own tables,
//! the two read-only views unread reads (see README), in a database of the
//! test's own on the machine's MariaDB or PostgreSQL.

use std::collections::HashMap;

use mysql_async::prelude::Queryable;
use rand::Rng;

/// Which SQL server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    MariaDb,
    Postgres,
}

/// Both servers the product supports.
pub const KINDS: [Kind; 2] = [Kind::MariaDb, Kind::Postgres];

/// A statement parameter.
#[derive(Clone, Debug)]
pub enum P {
    S(String),
    I(i64),
}

enum Client {
    Maria(mysql_async::Pool),
    Postgres(tokio_postgres::Client),
}

/// A fresh database with the app's schema and the views.
pub struct MessageStore {
    /// What unread's `sql_url` is set to.
    pub url: String,
    name: String,
    client: Client,
}

pub const APP_SCHEMA: &[&str] = &[
    "CREATE TABLE app_conversations (tenant VARCHAR(128) NOT NULL, conversation VARCHAR(128) NOT NULL, \
     category VARCHAR(32) NOT NULL, last_seq BIGINT NOT NULL, last_ts BIGINT NOT NULL, preview TEXT NOT NULL, \
     PRIMARY KEY (tenant, conversation))",
    "CREATE TABLE app_members (tenant VARCHAR(128) NOT NULL, conversation VARCHAR(128) NOT NULL, \
     user_id VARCHAR(128) NOT NULL, PRIMARY KEY (tenant, conversation, user_id))",
    "CREATE TABLE app_messages (tenant VARCHAR(128) NOT NULL, conversation VARCHAR(128) NOT NULL, \
     seq BIGINT NOT NULL, ts BIGINT NOT NULL, sender VARCHAR(128) NOT NULL, preview TEXT NOT NULL, \
     PRIMARY KEY (tenant, conversation, seq))",
    "CREATE VIEW unread_conversation_heads AS \
     SELECT tenant, conversation, last_seq, last_ts, category, preview FROM app_conversations",
    "CREATE VIEW unread_memberships AS SELECT tenant, conversation, user_id FROM app_members",
];

impl MessageStore {
    /// Creates a database of its own with the app's schema.
    pub async fn create(kind: Kind) -> MessageStore {
        let schema: Vec<String> = APP_SCHEMA.iter().map(|s| s.to_string()).collect();
        MessageStore::create_with(kind, &schema).await
    }

    /// Creates a database of its own with the statements of `schema`.
    pub async fn create_with(kind: Kind, schema: &[String]) -> MessageStore {
        let name = format!("unread_t{}", rand::rng().random::<u64>());
        let (url, client) = match kind {
            Kind::MariaDb => {
                let admin = mysql_async::Pool::new("mysql://root@127.0.0.1:3306/test");
                admin
                    .get_conn()
                    .await
                    .expect("MariaDB at 127.0.0.1:3306")
                    .query_drop(format!("CREATE DATABASE {name}"))
                    .await
                    .unwrap();
                admin.disconnect().await.unwrap();
                let url = format!("mysql://root@127.0.0.1:3306/{name}");
                (url.clone(), Client::Maria(mysql_async::Pool::new(url.as_str())))
            }
            Kind::Postgres => {
                let admin = postgres_client("postgres://postgres@127.0.0.1:5432/test").await;
                admin.batch_execute(&format!("CREATE DATABASE {name}")).await.unwrap();
                // The machine's server has TLS with a certificate for localhost: as
                // under Spin, a URL by IP address must turn TLS off.
                let url = format!("postgres://postgres@127.0.0.1:5432/{name}?sslmode=disable");
                (url.clone(), Client::Postgres(postgres_client(&url).await))
            }
        };
        let store = MessageStore { url, name, client };
        for statement in schema {
            store.exec(statement, &[]).await;
        }
        store
    }

    /// Drops the database.
    pub async fn drop_database(self) {
        match self.client {
            Client::Maria(pool) => {
                pool.get_conn().await.unwrap().query_drop(format!("DROP DATABASE {}", self.name)).await.unwrap();
                pool.disconnect().await.unwrap();
            }
            Client::Postgres(client) => {
                drop(client);
                let admin = postgres_client("postgres://postgres@127.0.0.1:5432/test").await;
                let _ = admin.batch_execute(&format!("DROP DATABASE {} WITH (FORCE)", self.name)).await;
            }
        }
    }

    /// Runs a statement written with `?` placeholders.
    pub async fn exec(&self, statement: &str, params: &[P]) {
        match &self.client {
            Client::Maria(pool) => {
                let mut conn = pool.get_conn().await.unwrap();
                conn.exec_drop(statement, maria_params(params)).await.unwrap_or_else(|e| panic!("{statement}: {e}"));
            }
            Client::Postgres(client) => {
                let boxed = postgres_params(params);
                let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                    boxed.iter().map(|b| b.as_ref() as &(dyn tokio_postgres::types::ToSql + Sync)).collect();
                client
                    .execute(&dollar_placeholders(statement), &refs)
                    .await
                    .unwrap_or_else(|e| panic!("{statement}: {e}"));
            }
        }
    }

    /// Rows of text and integer columns (integers come back as text).
    pub async fn rows(&self, statement: &str, params: &[P]) -> Vec<Vec<String>> {
        match &self.client {
            Client::Maria(pool) => {
                let mut conn = pool.get_conn().await.unwrap();
                let rows: Vec<mysql_async::Row> = conn.exec(statement, maria_params(params)).await.unwrap();
                rows.into_iter()
                    .map(|row| {
                        row.unwrap()
                            .into_iter()
                            .map(|v| match v {
                                mysql_async::Value::Bytes(b) => String::from_utf8(b).unwrap(),
                                mysql_async::Value::Int(n) => n.to_string(),
                                mysql_async::Value::UInt(n) => n.to_string(),
                                other => panic!("unexpected {other:?}"),
                            })
                            .collect()
                    })
                    .collect()
            }
            Client::Postgres(client) => {
                let boxed = postgres_params(params);
                let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                    boxed.iter().map(|b| b.as_ref() as &(dyn tokio_postgres::types::ToSql + Sync)).collect();
                let rows = client.query(&dollar_placeholders(statement), &refs).await.unwrap();
                rows.iter().map(|row| (0..row.len()).map(|i| postgres_text(row, i)).collect()).collect()
            }
        }
    }

    /// The app creates a conversation with its members.
    pub async fn create_conversation(&self, tenant: &str, conversation: &str, category: &str, members: &[String]) {
        self.exec(
            "INSERT INTO app_conversations (tenant, conversation, category, last_seq, last_ts, preview) VALUES (?, ?, ?, 0, 0, '{}')",
            &[s(tenant), s(conversation), s(category)],
        )
        .await;
        for member in members {
            self.add_member(tenant, conversation, member).await;
        }
    }

    /// The app adds a member to a conversation.
    pub async fn add_member(&self, tenant: &str, conversation: &str, user: &str) {
        let statement = "INSERT INTO app_members (tenant, conversation, user_id) VALUES (?, ?, ?)";
        self.exec(statement, &[s(tenant), s(conversation), s(user)]).await;
    }

    /// The app removes a member from a conversation.
    pub async fn remove_member(&self, tenant: &str, conversation: &str, user: &str) {
        let statement = "DELETE FROM app_members WHERE tenant = ? AND conversation = ? AND user_id = ?";
        self.exec(statement, &[s(tenant), s(conversation), s(user)]).await;
    }

    /// The category the app gave a conversation.
    pub async fn category(&self, tenant: &str, conversation: &str) -> String {
        let rows = self
            .rows(
                "SELECT category FROM app_conversations WHERE tenant = ? AND conversation = ?",
                &[s(tenant), s(conversation)],
            )
            .await;
        rows.into_iter().next().map(|mut row| row.remove(0)).unwrap_or_else(|| panic!("no conversation {conversation}"))
    }

    /// The app stores a message (before it calls touch). The head moves only
    /// forward, whatever order concurrent writers finish in.
    pub async fn store_message(
        &self,
        tenant: &str,
        conversation: &str,
        seq: u64,
        ts: u64,
        sender: &str,
        preview: &str,
    ) {
        self.exec(
            "INSERT INTO app_messages (tenant, conversation, seq, ts, sender, preview) VALUES (?, ?, ?, ?, ?, ?)",
            &[s(tenant), s(conversation), P::I(seq as i64), P::I(ts as i64), s(sender), s(preview)],
        )
        .await;
        // last_seq last: MySQL assigns left to right.
        self.exec(
            "UPDATE app_conversations SET \
             last_ts = CASE WHEN ? > last_seq THEN ? ELSE last_ts END, \
             preview = CASE WHEN ? > last_seq THEN ? ELSE preview END, \
             last_seq = GREATEST(last_seq, ?) WHERE tenant = ? AND conversation = ?",
            &[
                P::I(seq as i64),
                P::I(ts as i64),
                P::I(seq as i64),
                s(preview),
                P::I(seq as i64),
                s(tenant),
                s(conversation),
            ],
        )
        .await;
    }

    /// The app deletes a conversation (before it tells unread).
    pub async fn delete_conversation(&self, tenant: &str, conversation: &str) {
        for table in ["app_messages", "app_members", "app_conversations"] {
            self.exec(
                &format!("DELETE FROM {table} WHERE tenant = ? AND conversation = ?"),
                &[s(tenant), s(conversation)],
            )
            .await;
        }
    }

    /// unread's read cursors: (user, conversation) -> read_seq.
    pub async fn cursors(&self, tenant: &str) -> HashMap<(String, String), u64> {
        self.rows("SELECT user_id, conversation, read_seq FROM unread_read_cursors WHERE tenant = ?", &[s(tenant)])
            .await
            .into_iter()
            .map(|r| ((r[0].clone(), r[1].clone()), r[2].parse().unwrap()))
            .collect()
    }

    /// unread's per-user settings: (user, conversation) -> (muted, pinned, marked unread).
    pub async fn settings(&self, tenant: &str) -> HashMap<(String, String), (bool, bool, bool)> {
        self.rows(
            "SELECT user_id, conversation, muted, pinned, marked_unread FROM unread_read_cursors WHERE tenant = ?",
            &[s(tenant)],
        )
        .await
        .into_iter()
        .map(|r| ((r[0].clone(), r[1].clone()), (r[2] == "1", r[3] == "1", r[4] == "1")))
        .collect()
    }

    /// Whether unread's row of the user's conversation is marked unread;
    /// `None` when there is no row.
    pub async fn marked_unread(&self, tenant: &str, user: &str, conversation: &str) -> Option<bool> {
        self.settings(tenant).await.get(&(user.to_string(), conversation.to_string())).map(|s| s.2)
    }
}

/// A text, bigint or smallint column as text.
fn postgres_text(row: &tokio_postgres::Row, i: usize) -> String {
    row.try_get::<_, String>(i)
        .or_else(|_| row.try_get::<_, i64>(i).map(|n| n.to_string()))
        .unwrap_or_else(|_| row.get::<_, i16>(i).to_string())
}

/// A text parameter.
pub fn s(value: &str) -> P {
    P::S(value.to_string())
}

async fn postgres_client(url: &str) -> tokio_postgres::Client {
    let (client, connection) =
        tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("PostgreSQL at 127.0.0.1:5432");
    tokio::spawn(connection);
    client
}

fn maria_params(params: &[P]) -> Vec<mysql_async::Value> {
    params
        .iter()
        .map(|p| match p {
            P::S(v) => mysql_async::Value::from(v.as_str()),
            P::I(n) => mysql_async::Value::from(*n),
        })
        .collect()
}

fn postgres_params(params: &[P]) -> Vec<Box<dyn tokio_postgres::types::ToSql + Sync + Send>> {
    params
        .iter()
        .map(|p| -> Box<dyn tokio_postgres::types::ToSql + Sync + Send> {
            match p {
                P::S(v) => Box::new(v.clone()),
                P::I(n) => Box::new(*n),
            }
        })
        .collect()
}

fn dollar_placeholders(statement: &str) -> String {
    let mut n = 0;
    statement
        .chars()
        .map(|c| {
            if c == '?' {
                n += 1;
                format!("${n}")
            } else {
                c.to_string()
            }
        })
        .collect()
}
