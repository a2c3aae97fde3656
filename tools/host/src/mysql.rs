//! The `spin:mysql/mysql@3.0.0` host: outbound MySQL / MariaDB for components.
//!
//! Each `connection.open` makes one fresh connection (Spin also opens a new
//! connection per `open`), used by one statement at a time; a `query` holds
//! it until its rows have been read or the stream dropped. Addresses are
//! `mysql://user:password@host[:port]/database` URLs. As in Spin, one
//! instance holds at most 1024 connections (the next `open` connects, then
//! fails with `connection-failed("too many connections")`). Type mapping is
//! in [`types`].
//!
//! TLS follows Spin 4.1's `crates/factor-outbound-mysql` (`client.rs`,
//! `build_opts`), with mysql_async's `native-tls-tls` feature as Spin builds
//! it: without an `ssl-mode` (or `sslmode`, in any case) parameter, or with
//! `ssl-mode=DISABLED`, the connection is plain TCP; any other value
//! (`PREFERRED` too) requires TLS, with the server's certificate checked
//! against the system's trusted roots and its name against the host, and
//! fails against a server without TLS. A parameter mysql_async does not know
//! makes Spin panic (mysql_async's `OptsBuilder::from_opts` unwraps); here the
//! guest traps.

mod types;

use crate::bindings::spin::mysql::mysql::{
    self as wit, Column, Error as MysqlError, HostConnectionWithStore, ParameterValue, Row,
};
use crate::capability::{CapabilityHost, CapabilityView, InstanceTable, TableSlot};
use crate::error::HostError;
use crate::outbound::{AllowedHosts, Denied};
use crate::sql::{self, ByteBudget, OtherError, QueryParts, RowSender};
use futures_util::TryStreamExt;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Params, SslOpts};
use std::sync::Arc;
use tokio::sync::{Mutex, oneshot};
use wasmtime::component::{Accessor, Resource};

/// What a `connection` resource holds: one connection, used by one statement
/// at a time, and its place among the instance's connections.
pub struct MysqlConnection {
    conn: Arc<Mutex<Conn>>,
    _slot: TableSlot,
}

/// The `spin:mysql` settings and state of one store (one instance).
#[derive(Clone)]
pub struct MysqlCtx {
    /// The component's resolved `allowed_outbound_hosts`.
    pub allowed_hosts: Arc<AllowedHosts>,
    /// The connections this instance holds.
    connections: InstanceTable,
}

impl MysqlCtx {
    /// The component's settings; [`MysqlCtx::for_instance`] makes each store's copy.
    pub fn new(allowed_hosts: Arc<AllowedHosts>) -> MysqlCtx {
        MysqlCtx { allowed_hosts, connections: InstanceTable::default() }
    }

    /// The same settings with a count of connections of its own, for a new instance.
    pub fn for_instance(&self) -> MysqlCtx {
        MysqlCtx { connections: InstanceTable::default(), ..self.clone() }
    }
}

/// [`HasData`](wasmtime::component::HasData) marker for the `spin:mysql` host.
pub type MysqlHost = CapabilityHost<MysqlCtx>;

impl wit::Host for CapabilityView<'_, MysqlCtx> {
    fn convert_error(&mut self, error: HostError<MysqlError>) -> wasmtime::Result<MysqlError> {
        error.into_guest()
    }
}

impl wit::HostConnection for CapabilityView<'_, MysqlCtx> {}

/// What a `spin:mysql` function returns.
type Reply<T> = Result<T, HostError<MysqlError>>;

impl OtherError for MysqlError {
    fn other(message: String) -> MysqlError {
        MysqlError::Other(message)
    }
}

impl MysqlHost {
    /// The connection behind `connection`.
    fn connection<T>(
        accessor: &Accessor<T, Self>,
        connection: &Resource<MysqlConnection>,
    ) -> Result<Arc<Mutex<Conn>>, MysqlError> {
        Self::read(accessor, connection, |held| held.conn.clone())
            .ok_or_else(|| MysqlError::ConnectionFailed("no connection found".to_owned()))
    }
}

impl<T> HostConnectionWithStore<T> for MysqlHost {
    async fn open(accessor: &Accessor<T, Self>, address: String) -> Reply<Resource<MysqlConnection>> {
        Self::open_resource(accessor, |ctx| async move { connect(&address, &ctx).await }).await
    }

    async fn execute(
        accessor: &Accessor<T, Self>,
        connection: Resource<MysqlConnection>,
        statement: String,
        params: Vec<ParameterValue>,
    ) -> Reply<()> {
        let conn = Self::connection(accessor, &connection)?;
        let params = types::to_params(params)?;
        let mut conn = conn.lock().await;
        Ok(conn.exec_batch(statement, [params]).await.map_err(query_failed)?)
    }

    async fn query(
        accessor: &Accessor<T, Self>,
        connection: Resource<MysqlConnection>,
        statement: String,
        params: Vec<ParameterValue>,
    ) -> Reply<QueryParts<Vec<Column>, Row, MysqlError>> {
        let conn = Self::connection(accessor, &connection)?;
        let params = types::to_params(params)?;
        sql::stream_query(accessor, move |columns, rows| run_query(conn, statement, params, columns, rows)).await
    }

    async fn drop(accessor: &Accessor<T, Self>, rep: Resource<MysqlConnection>) -> wasmtime::Result<()> {
        Self::delete(accessor, rep)
    }
}

/// Checks `address` against the component's `allowed_outbound_hosts` and
/// connects; then, as in Spin, takes the instance's place for the connection
/// (so one over the cap is made, then dropped: `connection-failed`).
async fn connect(address: &str, ctx: &MysqlCtx) -> Result<MysqlConnection, HostError<MysqlError>> {
    ctx.allowed_hosts.permit(address, "mysql").map_err(|denied| match denied {
        Denied::NotAllowed => MysqlError::ConnectionFailed(format!("address {address} is not permitted")),
        Denied::CheckFailed(reason) => MysqlError::Other(reason),
    })?;
    let opts = match connection_opts(address) {
        Ok(opts) => opts,
        Err(OptsError::Url(text)) => return Err(MysqlError::ConnectionFailed(text).into()),
        Err(OptsError::SpinPanics(text)) => {
            return Err(HostError::Trap(wasmtime::Error::msg(format!(
                "spin:mysql cannot use the address: {text} (Spin 4.1 panics on it)"
            ))));
        }
    };
    let conn = Conn::new(opts).await.map_err(|e| MysqlError::ConnectionFailed(e.to_string()))?;
    let slot = ctx.connections.reserve().ok_or_else(|| MysqlError::ConnectionFailed("too many connections".into()))?;
    Ok(MysqlConnection { conn: Arc::new(Mutex::new(conn)), _slot: slot })
}

/// Why an address gives no connection options.
#[derive(Debug)]
enum OptsError {
    /// Not a URL: `connection-failed`.
    Url(String),
    /// A URL mysql_async refuses (an unknown parameter, say), on which Spin panics.
    SpinPanics(String),
}

/// Spin's `is_ssl_param`: the names it reads the TLS mode from.
fn is_ssl_param(key: &str) -> bool {
    ["ssl-mode", "sslmode"].contains(&key.to_lowercase().as_str())
}

/// Connection options from a `mysql://` URL as Spin's `build_opts` makes
/// them: the `ssl-mode` parameters taken out, and TLS required (with
/// mysql_async's default checks) unless every one of them says `disabled`.
fn connection_opts(address: &str) -> Result<Opts, OptsError> {
    let mut url = url::Url::parse(address).map_err(|e| OptsError::Url(format!("invalid MySQL URL: {e}")))?;
    let use_ssl = url.query_pairs().any(|(key, value)| is_ssl_param(&key) && value.to_lowercase() != "disabled");
    let rest: Vec<(String, String)> = url
        .query_pairs()
        .filter(|(key, _)| !is_ssl_param(key))
        .map(|(key, value)| (key.into_owned(), value.into_owned()))
        .collect();
    url.set_query(None);
    url.query_pairs_mut().extend_pairs(rest);
    let opts = Opts::from_url(url.as_str()).map_err(|e| OptsError::SpinPanics(e.to_string()))?;
    Ok(OptsBuilder::from_opts(opts).ssl_opts(use_ssl.then(SslOpts::default)).into())
}

/// Runs `statement` and streams its first result set: the query task of [`sql::stream_query`].
async fn run_query(
    conn: Arc<Mutex<Conn>>,
    statement: String,
    params: Params,
    columns_out: oneshot::Sender<Vec<Column>>,
    rows: RowSender<Row>,
) -> Result<(), MysqlError> {
    let mut conn = conn.lock_owned().await;
    let mut result = conn.exec_iter(statement, params).await.map_err(query_failed)?;
    let columns = result.columns().unwrap_or_default();
    let _ = columns_out.send(columns.iter().map(types::column).collect());
    let mut stream = result
        .stream::<mysql_async::Row>()
        .await
        .map_err(|e| MysqlError::Other(e.to_string()))?
        .ok_or_else(|| MysqlError::Other("unable to stream query result".to_owned()))?;
    let mut budget = ByteBudget::default();
    while let Some(row) = stream.try_next().await.map_err(|e| MysqlError::Other(e.to_string()))? {
        let row = types::convert_row(row, &columns)?;
        budget.charge(row.iter().map(types::value_size).sum()).map_err(MysqlError::Other)?;
        rows.send(row).await.map_err(|closed| MysqlError::Other(format!("async error: {closed}")))?;
    }
    Ok(())
}

/// `query-failed` with the driver's error, as Spin reports it.
fn query_failed(error: mysql_async::Error) -> MysqlError {
    MysqlError::QueryFailed(format!("{error:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn debug<D: std::fmt::Debug>(value: D) -> String {
        format!("{value:?}")
    }

    #[test]
    fn addresses_become_options() {
        let opts = connection_opts("mysql://root:pw@127.0.0.1:3307/test").unwrap();
        assert_eq!(opts.ip_or_hostname(), "127.0.0.1");
        assert_eq!(opts.tcp_port(), 3307);
        assert_eq!(opts.user(), Some("root"));
        assert_eq!(opts.db_name(), Some("test"));
        assert!(opts.ssl_opts().is_none(), "plain without ssl-mode");
        // Spin's own cases (`client.rs` tests) and the modes between.
        let tls = |address: &str| connection_opts(address).unwrap().ssl_opts().cloned();
        assert_eq!(tls("mysql://myuser:password@127.0.0.1/db?ssl-mode=DISABLED"), None);
        assert_eq!(tls("mysql://myuser:password@127.0.0.1/db?sslmode=disabled"), None);
        assert_eq!(tls("mysql://myuser:password@127.0.0.1/db?sslMode=VERIFY_CA"), Some(SslOpts::default()));
        assert_eq!(tls("mysql://h/db?ssl-mode=PREFERRED"), Some(SslOpts::default()), "preferred requires TLS too");
        let opts = connection_opts("mysql://myuser:password@127.0.0.1/db?SsLmOdE=VERIFY_CA&pool_max=10").unwrap();
        assert!(opts.ssl_opts().is_some());
        assert_eq!(opts.pool_opts().constraints().max(), 10);
        assert!(matches!(connection_opts("host=h user=u"), Err(OptsError::Url(_))));
        assert!(matches!(connection_opts("mysql://h/db?no_such_option=1"), Err(OptsError::SpinPanics(_))));
    }

    /// The server for the live tests: `UNREAD_TEST_MYSQL`, or MariaDB/MySQL on
    /// 127.0.0.1:3306 as root without a password, database `test`.
    fn test_server() -> String {
        std::env::var("UNREAD_TEST_MYSQL").unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
    }

    /// A connection to [`test_server`], or `None` (the test is skipped) if there is none.
    async fn test_connection() -> Option<MysqlConnection> {
        let address = test_server();
        let allowed = MysqlCtx::new(Arc::new(AllowedHosts::parse("test", &["mysql://*:*"]).unwrap())).for_instance();
        match connect(&address, &allowed).await {
            Ok(conn) => Some(conn),
            Err(e) => {
                eprintln!("skipping: no MySQL server at {address}: {e:?}");
                None
            }
        }
    }

    /// Runs `statement` as `query` does, without a guest: (columns, rows, outcome).
    async fn query(
        conn: &MysqlConnection,
        statement: &str,
        params: Vec<ParameterValue>,
    ) -> (Vec<String>, Vec<String>, Result<(), MysqlError>) {
        let (columns_tx, columns_rx) = oneshot::channel();
        let (sender, mut receiver) = sql::test_channel(64);
        let params = types::to_params(params).unwrap();
        let outcome = run_query(conn.conn.clone(), statement.to_owned(), params, columns_tx, sender).await;
        let columns = columns_rx.await.unwrap_or_default();
        let columns = columns.iter().map(|c| format!("{}:{:?}", c.name, c.data_type)).collect();
        let mut rows = Vec::new();
        while let Ok(row) = receiver.try_recv() {
            rows.push(debug(row));
        }
        (columns, rows, outcome)
    }

    async fn execute(conn: &MysqlConnection, statement: &str, params: Vec<ParameterValue>) {
        let mut conn = conn.conn.lock().await;
        conn.exec_batch(statement, [types::to_params(params).unwrap()]).await.unwrap();
    }

    #[tokio::test]
    async fn live_values_round_trip() {
        use crate::bindings::spin::mysql::mysql::DbValue;
        let Some(conn) = test_connection().await else {
            return;
        };
        execute(
            &conn,
            "CREATE TEMPORARY TABLE probe (id INT, flag BOOLEAN, tiny TINYINT UNSIGNED, big BIGINT, \
             ubig BIGINT UNSIGNED, s VARCHAR(50), bin VARBINARY(8), t TEXT, amount DECIMAL(6,2), f FLOAT) \
             CHARACTER SET utf8mb4",
            vec![],
        )
        .await;
        let insert = "INSERT INTO probe VALUES (?, TRUE, 255, ?, 18446744073709551615, ?, X'00FF', 'text', 9.99, 0.5)";
        let values =
            vec![ParameterValue::Int64(1), ParameterValue::Int64(i64::MIN), ParameterValue::Str("ünï ✓ 🦀".into())];
        execute(&conn, insert, values).await;
        execute(&conn, "INSERT INTO probe (id, s) VALUES (2, ?)", vec![ParameterValue::DbNull]).await;

        let (columns, rows, outcome) =
            query(&conn, "SELECT id, flag, tiny, big, ubig, s, bin, t FROM probe ORDER BY id", vec![]).await;
        outcome.unwrap();
        assert_eq!(
            columns.join(" "),
            "id:DbDataType::Int32 flag:DbDataType::Int8 tiny:DbDataType::Uint8 big:DbDataType::Int64 \
             ubig:DbDataType::Uint64 s:DbDataType::Str bin:DbDataType::Binary t:DbDataType::Str"
        );
        assert_eq!(
            rows[0],
            debug(vec![
                DbValue::Int32(1),
                DbValue::Int8(1),
                DbValue::Uint8(255),
                DbValue::Int64(i64::MIN),
                DbValue::Uint64(u64::MAX),
                DbValue::Str("ünï ✓ 🦀".into()),
                DbValue::Binary(vec![0, 255]),
                DbValue::Str("text".into()),
            ])
        );
        assert_eq!(rows[1], debug([&[DbValue::Int32(2)][..], &vec![DbValue::DbNull; 7]].concat()));

        // DECIMAL, FLOAT (like dates, BIT, ...) are `other`: NULL reads, a value fails the query.
        for column in ["amount", "f"] {
            let (columns, rows, outcome) =
                query(&conn, &format!("SELECT {column} FROM probe ORDER BY id DESC"), vec![]).await;
            assert_eq!(columns, [format!("{column}:DbDataType::Other")]);
            assert_eq!(rows, [debug(vec![DbValue::DbNull])]);
            assert!(
                matches!(&outcome, Err(MysqlError::ValueConversionFailed(text)) if text.contains(column)),
                "{outcome:?}"
            );
        }

        let (columns, rows, outcome) = query(&conn, "SELECT id FROM probe WHERE id > 5", vec![]).await;
        assert_eq!((columns.len(), rows.len()), (1, 0));
        outcome.unwrap();

        let (_, _, outcome) = query(&conn, "SELEC nope", vec![]).await;
        assert!(matches!(outcome, Err(MysqlError::QueryFailed(_))), "{outcome:?}");
    }

    /// Whether the MySQL/MariaDB server at `address` (host:port) offers TLS
    /// (the `CLIENT_SSL` capability of its greeting), or `None` if nothing answers.
    fn offers_tls(address: &str) -> Option<bool> {
        use std::io::Read;
        let mut stream = std::net::TcpStream::connect(address).ok()?;
        stream.set_read_timeout(Some(std::time::Duration::from_secs(5))).ok()?;
        let mut header = [0u8; 4];
        stream.read_exact(&mut header).ok()?;
        let mut greeting =
            vec![0u8; usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16];
        stream.read_exact(&mut greeting).ok()?;
        // Protocol version, the server version (NUL-terminated), the
        // connection id, 8 bytes of salt and a filler byte, then the lower
        // capability flags.
        let version_end = greeting.iter().skip(1).position(|&b| b == 0)? + 1;
        let flags = version_end + 1 + 4 + 8 + 1;
        let lower = u16::from_le_bytes([*greeting.get(flags)?, *greeting.get(flags + 1)?]);
        Some(lower & 0x0800 != 0)
    }

    /// The machine's MariaDB/MySQL (127.0.0.1:3306, root without a password),
    /// as the project's tests reach it: without `ssl-mode`, plain TCP; with
    /// `ssl-mode=REQUIRED` (or `PREFERRED`), TLS is required, so a server
    /// without TLS (MariaDB's default here) fails it.
    #[tokio::test]
    async fn live_ssl_mode_against_the_machine_server() {
        let Some(tls_offered) = offers_tls("127.0.0.1:3306") else {
            eprintln!("skipping: no MySQL server at 127.0.0.1:3306");
            return;
        };
        let allowed =
            MysqlCtx::new(Arc::new(AllowedHosts::parse("c", &["mysql://127.0.0.1:3306"]).unwrap())).for_instance();
        for address in ["mysql://root@127.0.0.1:3306/test", "mysql://root@127.0.0.1:3306/test?ssl-mode=DISABLED"] {
            assert!(connect(address, &allowed).await.is_ok(), "{address}");
        }
        for mode in ["REQUIRED", "PREFERRED"] {
            let address = format!("mysql://root@127.0.0.1:3306/test?ssl-mode={mode}");
            match connect(&address, &allowed).await {
                Ok(_) => assert!(tls_offered, "{address} connected to a server without TLS"),
                Err(HostError::Guest(MysqlError::ConnectionFailed(text))) => {
                    eprintln!("{address}: {text}");
                    if !tls_offered {
                        assert!(
                            text.contains("Client asked for SSL but server does not have this capability"),
                            "{text}"
                        );
                    }
                }
                Err(other) => panic!("{address}: {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn addresses_spin_panics_on_trap() {
        let allowed = MysqlCtx::new(Arc::new(AllowedHosts::parse("c", &["mysql://*:*"]).unwrap())).for_instance();
        let outcome = connect("mysql://root@127.0.0.1:3306/test?no_such_option=1", &allowed).await;
        assert!(matches!(outcome, Err(HostError::Trap(_))), "{:?}", outcome.err());
        // The permission is checked first, as in Spin.
        let refused = MysqlCtx::new(Arc::new(AllowedHosts::parse("c", &["mysql://10.0.0.1"]).unwrap())).for_instance();
        let outcome = connect("mysql://root@127.0.0.1:3306/test?no_such_option=1", &refused).await;
        assert!(matches!(outcome, Err(HostError::Guest(MysqlError::ConnectionFailed(_)))), "{:?}", outcome.err());
    }

    #[tokio::test]
    async fn addresses_outside_allowed_hosts_are_refused() {
        let allowed =
            MysqlCtx::new(Arc::new(AllowedHosts::parse("c", &["mysql://127.0.0.1:3306"]).unwrap())).for_instance();
        let Err(HostError::Guest(MysqlError::ConnectionFailed(text))) =
            connect("mysql://root@10.9.9.9/test", &allowed).await
        else {
            panic!("expected connection-failed");
        };
        assert_eq!(text, "address mysql://root@10.9.9.9/test is not permitted");
    }
}
