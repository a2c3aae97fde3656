//! The `spin:postgres/postgres@4.2.0` host: outbound PostgreSQL for components.
//!
//! Spin keeps a pool of connections per address (up to 64, reset with
//! `DISCARD`-style cleanup when returned). This host instead opens one fresh
//! connection per `open` / `build`, closed when the guest drops it, so
//! session state never leaks between opens here either. A connection runs
//! statements concurrently (the driver pipelines them).
//!
//! Addresses are libpq connection strings (`host=... user=... dbname=...`) or
//! `postgres://` URLs; every TCP host in them must be allowed by
//! `allowed_outbound_hosts` (Unix sockets are refused). As in Spin, one
//! instance holds at most 1024 connections (the next `open` connects, then
//! fails with `connection-failed("too many connections")`) and 1024
//! connection builders (the next one traps).
//!
//! TLS is negotiated as Spin 4.1's `crates/factor-outbound-pg` (`client.rs`)
//! does it, with the same crates (tokio-postgres, postgres-native-tls,
//! native-tls: OpenSSL here): `sslmode=disable` connects in plain TCP; any
//! other mode (`prefer`, the default, or `require`) asks the server for TLS
//! and, if it agrees, verifies its certificate against the system's trusted
//! roots (plus the root given to `connection-builder.set-ca-root`) and its
//! name against the host of the address. A failed handshake fails the
//! connection: `prefer` falls back to plain TCP only when the server refuses
//! TLS, never after a handshake that failed (unlike libpq). `require` fails
//! when the server refuses TLS. So against a server with a certificate the
//! client does not trust, or one for another name (Debian's default
//! self-signed `localhost` certificate reached as `127.0.0.1`), every
//! connection fails unless the address says `sslmode=disable`.
//!
//! As in Spin, `query-async`'s columns come from the first row (an empty
//! result has no columns); type mapping is in [`types`].

// The WIT error carries PostgreSQL's structured error, so it is large; it is
// returned by value as the bindings require.
#![allow(clippy::result_large_err)]

mod types;

use crate::bindings::spin::postgres::postgres::{
    self as wit, Column, DbError, Error as PgError, HostConnectionBuilderWithStore, HostConnectionWithStore,
    ParameterValue, QueryError, Row, RowSet,
};
use crate::capability::{CapabilityHost, CapabilityView, InstanceTable, TableSlot};
use crate::error::HostError;
use crate::outbound::{AllowedHosts, Denied};
use crate::sql::{self, ByteBudget, MAX_RESULT_BYTES, OtherError, QueryParts, RowSender};
use futures_util::StreamExt;
use postgres_native_tls::MakeTlsConnector;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Config, NoTls, Socket};
use types::SqlParam;
use wasmtime::component::{Accessor, Resource};

/// What a `connection` resource holds: a client on one connection, and its
/// place among the instance's connections.
pub struct PgConnection {
    client: Arc<Client>,
    _slot: TableSlot,
}

/// What a `connection-builder` resource holds: the address to connect to and
/// an extra trusted root certificate.
pub struct PgConnectionBuilder {
    address: String,
    root_ca: Option<native_tls::Certificate>,
    _slot: TableSlot,
}

/// The `spin:postgres` settings and state of one store (one instance).
#[derive(Clone)]
pub struct PgCtx {
    /// The component's resolved `allowed_outbound_hosts`.
    pub allowed_hosts: Arc<AllowedHosts>,
    /// The connections this instance holds.
    connections: InstanceTable,
    /// The connection builders this instance holds.
    builders: InstanceTable,
}

impl PgCtx {
    /// The component's settings; [`PgCtx::for_instance`] makes each store's copy.
    pub fn new(allowed_hosts: Arc<AllowedHosts>) -> PgCtx {
        PgCtx { allowed_hosts, connections: InstanceTable::default(), builders: InstanceTable::default() }
    }

    /// The same settings with counts of their own, for a new instance.
    pub fn for_instance(&self) -> PgCtx {
        PgCtx::new(self.allowed_hosts.clone())
    }
}

/// [`HasData`](wasmtime::component::HasData) marker for the `spin:postgres` host.
pub type PgHost = CapabilityHost<PgCtx>;

impl wit::Host for CapabilityView<'_, PgCtx> {
    fn convert_error(&mut self, error: HostError<PgError>) -> wasmtime::Result<PgError> {
        error.into_guest()
    }
}

/// What a `spin:postgres` function returns.
type Reply<T> = Result<T, HostError<PgError>>;

impl OtherError for PgError {
    fn other(message: String) -> PgError {
        PgError::Other(message)
    }
}

/// The synchronous `connection` functions: the store stays borrowed while they run.
impl wit::HostConnection for CapabilityView<'_, PgCtx> {
    async fn open(&mut self, address: String) -> Reply<Resource<PgConnection>> {
        let connection = connect(&address, None, self.ctx).await?;
        Ok(self.push(connection)?)
    }

    async fn query(
        &mut self,
        connection: Resource<PgConnection>,
        statement: String,
        params: Vec<ParameterValue>,
    ) -> Reply<RowSet> {
        let client = client_of(self, &connection)?;
        Ok(collect_rows(&client, &statement, &params).await?)
    }

    async fn execute(
        &mut self,
        connection: Resource<PgConnection>,
        statement: String,
        params: Vec<ParameterValue>,
    ) -> Reply<u64> {
        let client = client_of(self, &connection)?;
        Ok(execute(&client, &statement, &params).await?)
    }
}

/// The synchronous `connection-builder` functions.
impl wit::HostConnectionBuilder for CapabilityView<'_, PgCtx> {
    fn new(&mut self, address: String) -> wasmtime::Result<Resource<PgConnectionBuilder>> {
        // Spin fails (traps) when its table of builders is full.
        let slot = self.ctx.builders.reserve().ok_or_else(|| wasmtime::Error::msg("out of builder table space"))?;
        self.push(PgConnectionBuilder { address, root_ca: None, _slot: slot })
    }

    /// Trusts `certificate` (PEM) as a root for this builder's connections.
    fn set_ca_root(&mut self, builder: Resource<PgConnectionBuilder>, certificate: String) -> Reply<()> {
        let root_ca = parse_root_certificate(&certificate)?;
        let held = self.table.get_mut(&builder).map_err(|_| no_builder())?;
        held.root_ca = Some(root_ca);
        Ok(())
    }

    async fn build(&mut self, builder: Resource<PgConnectionBuilder>) -> Reply<Resource<PgConnection>> {
        let (address, root_ca) = self.read(&builder, builder_info).ok_or_else(no_builder)?;
        let connection = connect(&address, root_ca, self.ctx).await?;
        Ok(self.push(connection)?)
    }
}

impl<T> HostConnectionWithStore<T> for PgHost {
    async fn open_async(accessor: &Accessor<T, Self>, address: String) -> Reply<Resource<PgConnection>> {
        Self::open_resource(accessor, |ctx| async move { connect(&address, None, &ctx).await }).await
    }

    async fn query_async(
        accessor: &Accessor<T, Self>,
        connection: Resource<PgConnection>,
        statement: String,
        params: Vec<ParameterValue>,
    ) -> Reply<QueryParts<Vec<Column>, Row, PgError>> {
        let client = accessor.with(|mut access| client_of(&mut access.get(), &connection))?;
        let params = query_params(&params)?;
        sql::stream_query(accessor, move |columns, rows| stream_rows(client, statement, params, columns, rows)).await
    }

    async fn execute_async(
        accessor: &Accessor<T, Self>,
        connection: Resource<PgConnection>,
        statement: String,
        params: Vec<ParameterValue>,
    ) -> Reply<u64> {
        let client = accessor.with(|mut access| client_of(&mut access.get(), &connection))?;
        Ok(execute(&client, &statement, &params).await?)
    }

    async fn drop(accessor: &Accessor<T, Self>, rep: Resource<PgConnection>) -> wasmtime::Result<()> {
        Self::delete(accessor, rep)
    }
}

impl<T> HostConnectionBuilderWithStore<T> for PgHost {
    async fn build_async(
        accessor: &Accessor<T, Self>,
        builder: Resource<PgConnectionBuilder>,
    ) -> Reply<Resource<PgConnection>> {
        let (address, root_ca) = Self::read(accessor, &builder, builder_info).ok_or_else(no_builder)?;
        Self::open_resource(accessor, |ctx| async move { connect(&address, root_ca, &ctx).await }).await
    }

    async fn drop(accessor: &Accessor<T, Self>, rep: Resource<PgConnectionBuilder>) -> wasmtime::Result<()> {
        Self::delete(accessor, rep)
    }
}

/// The client behind `connection`.
fn client_of(
    view: &mut CapabilityView<'_, PgCtx>,
    connection: &Resource<PgConnection>,
) -> Result<Arc<Client>, PgError> {
    view.read(connection, |held| held.client.clone())
        .ok_or_else(|| PgError::ConnectionFailed("no connection found".to_owned()))
}

/// The error for a builder that is not in the table.
fn no_builder() -> PgError {
    PgError::ConnectionFailed("no builder found".to_owned())
}

/// What `build` connects with: the address and the extra root, if any.
fn builder_info(held: &PgConnectionBuilder) -> (String, Option<native_tls::Certificate>) {
    (held.address.clone(), held.root_ca.clone())
}

/// A root certificate given to `set-ca-root`, or Spin's `other` error (whose
/// text repeats itself: Spin's outer message wraps an inner one saying the same).
fn parse_root_certificate(pem: &str) -> Result<native_tls::Certificate, PgError> {
    native_tls::Certificate::from_pem(pem.as_bytes())
        .map_err(|_| PgError::Other("invalid root certificate: invalid root certificate".to_owned()))
}

/// Checks every host of `address` against the component's
/// `allowed_outbound_hosts` and connects, with TLS unless the address says
/// `sslmode=disable` (Spin's `create_connection_pool`); then, as in Spin,
/// takes the instance's place for the connection (so one over the cap is
/// made, then dropped: `connection-failed`).
async fn connect(
    address: &str,
    root_ca: Option<native_tls::Certificate>,
    ctx: &PgCtx,
) -> Result<PgConnection, PgError> {
    let config = permitted_config(address, &ctx.allowed_hosts)?;
    let client = if config.get_ssl_mode() == SslMode::Disable {
        start(&config, NoTls).await
    } else {
        let mut builder = native_tls::TlsConnector::builder();
        if let Some(root_ca) = root_ca {
            builder.add_root_certificate(root_ca);
        }
        let connector = builder.build().map_err(|e| connection_failed(anyhow::Error::from(e)))?;
        start(&config, MakeTlsConnector::new(connector)).await
    };
    let client = Arc::new(client.map_err(|e| connection_failed(anyhow::Error::from(e)))?);
    let slot = ctx.connections.reserve().ok_or_else(|| PgError::ConnectionFailed("too many connections".into()))?;
    Ok(PgConnection { client, _slot: slot })
}

/// Connects with `tls` and drives the connection in a task of its own.
async fn start<T>(config: &Config, tls: T) -> Result<Client, tokio_postgres::Error>
where
    T: MakeTlsConnect<Socket>,
    T::Stream: Send + 'static,
{
    let (client, connection) = config.connect(tls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("unread-host: a postgres connection failed: {e}");
        }
    });
    Ok(client)
}

/// `connection-failed` with the error and its causes.
fn connection_failed(error: anyhow::Error) -> PgError {
    PgError::ConnectionFailed(format!("{error:#}"))
}

/// Parses `address` and checks each of its TCP hosts (with the port at the
/// same position, or the only port) against `allowed_hosts`, as Spin does.
fn permitted_config(address: &str, allowed_hosts: &AllowedHosts) -> Result<Config, PgError> {
    let config: Config =
        address.parse().map_err(|e: tokio_postgres::Error| PgError::ConnectionFailed(e.to_string()))?;
    let ports = config.get_ports();
    for (i, host) in config.get_hosts().iter().enumerate() {
        let Host::Tcp(name) = host else {
            return Err(PgError::ConnectionFailed("Unix sockets are not supported on WebAssembly".to_owned()));
        };
        let port = ports.get(i).or(if ports.len() == 1 { ports.first() } else { None });
        let destination = match port {
            Some(port) => format!("{name}:{port}"),
            None => name.clone(),
        };
        allowed_hosts.permit(&destination, "postgres").map_err(|denied| match denied {
            Denied::NotAllowed => {
                PgError::ConnectionFailed(format!("address postgres://{destination} is not permitted"))
            }
            Denied::CheckFailed(reason) => PgError::Other(reason),
        })?;
    }
    Ok(config)
}

/// Converts query parameters; a bad one is `bad-parameter` (as in Spin's `query`).
fn query_params(params: &[ParameterValue]) -> Result<Vec<SqlParam>, PgError> {
    types::to_sql_params(params).map_err(|e| PgError::BadParameter(format!("{e:#}")))
}

/// Streams the rows of `statement`: the query task of [`sql::stream_query`].
///
/// Columns are sent with the first row, or as none if the result is empty or
/// fails before it. A guest that drops the row stream ends the task: quietly
/// if it was waiting for the database, with an `async error` if it was
/// handing over a row (as in Spin).
async fn stream_rows(
    client: Arc<Client>,
    statement: String,
    params: Vec<SqlParam>,
    columns_out: oneshot::Sender<Vec<Column>>,
    rows: RowSender<Row>,
) -> Result<(), PgError> {
    let results = client.query_raw(statement.as_str(), params).await.map_err(query_failed)?;
    let mut results = std::pin::pin!(results);
    let mut columns_out = Some(columns_out);
    loop {
        let next = tokio::select! {
            biased;
            () = rows.closed() => return Ok(()),
            next = results.next() => next,
        };
        let row = match next {
            None => return Ok(()),
            Some(Ok(row)) => row,
            Some(Err(e)) => {
                send_columns(&mut columns_out, Vec::new());
                return Err(query_failed(e));
            }
        };
        send_columns(&mut columns_out, types::columns(&row));
        let values = row_values(&row)?;
        if values.iter().map(types::value_size).sum::<usize>() > MAX_RESULT_BYTES {
            return Err(text_error(sql::too_large_message()));
        }
        rows.send(values).await.map_err(|closed| text_error(format!("async error: {closed}")))?;
    }
}

/// Sends the columns if they have not been sent yet.
fn send_columns(out: &mut Option<oneshot::Sender<Vec<Column>>>, columns: Vec<Column>) {
    if let Some(out) = out.take() {
        let _ = out.send(columns);
    }
}

/// Runs `statement`, returning the count of affected rows; a bad parameter
/// is `value-conversion-failed` here, as in Spin's `execute`.
async fn execute(client: &Client, statement: &str, params: &[ParameterValue]) -> Result<u64, PgError> {
    let params = types::to_sql_params(params).map_err(|e| PgError::ValueConversionFailed(format!("{e:#}")))?;
    client.execute_raw(statement, params).await.map_err(query_failed)
}

/// Every row of `statement`, within [`MAX_RESULT_BYTES`]: the synchronous `query`.
async fn collect_rows(client: &Client, statement: &str, params: &[ParameterValue]) -> Result<RowSet, PgError> {
    let params = query_params(params)?;
    let results = client.query_raw(statement, params).await.map_err(query_failed)?;
    let mut results = std::pin::pin!(results);
    let mut set = RowSet { columns: Vec::new(), rows: Vec::new() };
    let mut budget = ByteBudget::default();
    while let Some(row) = results.next().await {
        // As in Spin, an error while reading the rows is only text here.
        let row = row.map_err(|e| text_error(format!("{:?}", query_failed(e))))?;
        if set.rows.is_empty() {
            set.columns = types::columns(&row);
        }
        let values = row_values(&row)?;
        budget.charge(values.iter().map(types::value_size).sum()).map_err(text_error)?;
        set.rows.push(values);
    }
    Ok(set)
}

/// The WIT values of `row`; a value that does not convert fails the query.
fn row_values(row: &tokio_postgres::Row) -> Result<Row, PgError> {
    types::convert_row(row).map_err(|e| text_error(format!("{e:#}")))
}

/// `query-failed` with only a text.
fn text_error(text: String) -> PgError {
    PgError::QueryFailed(QueryError::Text(text))
}

/// `query-failed`, with PostgreSQL's structured error when the server sent one.
fn query_failed(error: tokio_postgres::Error) -> PgError {
    let as_text = format!("{error:?}");
    let Some(db) = error.as_db_error() else {
        return text_error(as_text);
    };
    PgError::QueryFailed(QueryError::DbError(DbError {
        as_text,
        severity: db.severity().to_owned(),
        code: db.code().code().to_owned(),
        message: db.message().to_owned(),
        detail: db.detail().map(str::to_owned),
        extras: db_error_extras(db),
    }))
}

/// The optional fields of a server error, named as Spin names them.
fn db_error_extras(db: &tokio_postgres::error::DbError) -> Vec<(String, String)> {
    let line = db.line().map(|n| n.to_string());
    [
        ("column", db.column().map(str::to_owned)),
        ("constraint", db.constraint().map(str::to_owned)),
        ("routine", db.routine().map(str::to_owned)),
        ("hint", db.hint().map(str::to_owned)),
        ("table", db.table().map(str::to_owned)),
        ("datatype", db.datatype().map(str::to_owned)),
        ("schema", db.schema().map(str::to_owned)),
        ("file", db.file().map(str::to_owned)),
        ("line", line),
        ("where_", db.where_().map(str::to_owned)),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some((name.to_owned(), value?)))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(entries: &[&str]) -> AllowedHosts {
        AllowedHosts::parse("c", entries).unwrap()
    }

    /// One instance's settings, allowed `entries`.
    fn ctx(entries: &[&str]) -> PgCtx {
        PgCtx::new(Arc::new(allowed(entries))).for_instance()
    }

    fn refusal(address: &str, hosts: &AllowedHosts) -> String {
        match permitted_config(address, hosts) {
            Err(PgError::ConnectionFailed(text)) => text,
            other => panic!("expected connection-failed for {address}, got {:?}", other.map(|_| ())),
        }
    }

    #[test]
    fn every_host_of_the_address_is_checked() {
        let hosts = allowed(&["postgres://127.0.0.1:5432", "postgres://db.example.com"]);
        for address in [
            "host=127.0.0.1 user=postgres dbname=test",
            "host=127.0.0.1 port=5432",
            "postgres://postgres@127.0.0.1/test",
            "postgres://postgres:pw@127.0.0.1:5432/test?sslmode=disable",
            "postgres://127.0.0.1,db.example.com/test",
            "host=127.0.0.1,db.example.com port=5432,5432",
        ] {
            assert!(permitted_config(address, &hosts).is_ok(), "{address}");
        }
        assert_eq!(refusal("host=127.0.0.1 port=5433", &hosts), "address postgres://127.0.0.1:5433 is not permitted");
        assert_eq!(
            refusal("postgres://127.0.0.1,10.0.0.1/test", &hosts),
            "address postgres://10.0.0.1:5432 is not permitted"
        );
        assert_eq!(
            refusal("host=db.example.com,127.0.0.1 port=5432,6000", &hosts),
            "address postgres://127.0.0.1:6000 is not permitted"
        );
    }

    #[test]
    fn unix_sockets_and_bad_addresses_are_refused() {
        let hosts = allowed(&["*://*:*"]);
        assert_eq!(
            refusal("host=/var/run/postgresql user=postgres", &hosts),
            "Unix sockets are not supported on WebAssembly"
        );
        assert!(!refusal("host=h port=notaport", &hosts).is_empty());
    }

    #[test]
    fn unresolvable_allowed_hosts_are_other_errors() {
        let vars = crate::variables::AppVariables::default();
        let hosts = AllowedHosts::resolve("c", &["postgres://{{ nope }}".to_owned()], &vars, &vars).unwrap();
        assert!(matches!(permitted_config("host=127.0.0.1", &hosts), Err(PgError::Other(_))));
    }

    fn debug<D: std::fmt::Debug>(value: D) -> String {
        format!("{value:?}")
    }

    /// The server for the live tests: `UNREAD_TEST_POSTGRES`, or PostgreSQL on
    /// 127.0.0.1:5432 as `postgres` (trust authentication), database `test`,
    /// without TLS (which fails against Debian's default certificate, for
    /// `localhost`).
    fn test_server() -> String {
        std::env::var("UNREAD_TEST_POSTGRES")
            .unwrap_or_else(|_| "host=127.0.0.1 user=postgres dbname=test sslmode=disable".into())
    }

    /// A client of [`test_server`], or `None` (the test is skipped) if there is none.
    async fn test_client() -> Option<Arc<Client>> {
        let address = test_server();
        match connect(&address, None, &ctx(&["postgres://*:*"])).await {
            Ok(conn) => Some(conn.client),
            Err(e) => {
                eprintln!("skipping: no PostgreSQL server at {address}: {e:?}");
                None
            }
        }
    }

    /// Runs `statement` as `query-async` does, without a guest: (columns, rows, outcome).
    async fn query(
        client: &Arc<Client>,
        statement: &str,
        params: &[ParameterValue],
    ) -> Result<(Vec<String>, Vec<String>, Result<(), PgError>), PgError> {
        let params = query_params(params)?;
        let (columns_tx, columns_rx) = oneshot::channel();
        let (sender, mut receiver) = sql::test_channel(64);
        let outcome = stream_rows(client.clone(), statement.to_owned(), params, columns_tx, sender).await;
        let columns = columns_rx.await.unwrap_or_default();
        let columns = columns.iter().map(|c| format!("{}:{:?}", c.name, c.data_type)).collect();
        let mut rows = Vec::new();
        while let Ok(row) = receiver.try_recv() {
            rows.push(debug(row));
        }
        Ok((columns, rows, outcome))
    }

    #[tokio::test]
    async fn live_values_round_trip() {
        use crate::bindings::spin::postgres::postgres::DbValue;
        let Some(client) = test_client().await else {
            return;
        };
        let create = "CREATE TEMPORARY TABLE probe (id int4, small int2, big int8, n numeric, t text, v varchar(9), \
                      c char(2), bin bytea, jb jsonb, js json, flag bool)";
        execute(&client, create, &[]).await.unwrap();
        let insert = "INSERT INTO probe VALUES ($1::int8::int4, -32768, $2, 12.50, $3, 'v', 'c', '\\x00ff', \
                      '{\"b\": [1, null], \"a\": \"x\"}', '{\"z\": 1}', true)";
        let values =
            [ParameterValue::Int64(1), ParameterValue::Int64(i64::MAX), ParameterValue::Str("ünï ✓ 🦀".into())];
        assert_eq!(execute(&client, insert, &values).await.unwrap(), 1);
        let nulls = "INSERT INTO probe (id, t) VALUES (2, $1)";
        assert_eq!(execute(&client, nulls, &[ParameterValue::DbNull]).await.unwrap(), 1);

        let select = "SELECT id, small, big, n, t, v, c, bin, jb, js FROM probe ORDER BY id";
        let (columns, rows, outcome) = query(&client, select, &[]).await.unwrap();
        outcome.unwrap();
        assert_eq!(
            columns.join(" "),
            "id:DbDataType::Int32 small:DbDataType::Int16 big:DbDataType::Int64 n:DbDataType::Decimal \
             t:DbDataType::Str v:DbDataType::Str c:DbDataType::Str bin:DbDataType::Binary jb:DbDataType::Jsonb \
             js:DbDataType::Other(\"json\")"
        );
        assert_eq!(
            rows[0],
            debug(vec![
                DbValue::Int32(1),
                DbValue::Int16(i16::MIN),
                DbValue::Int64(i64::MAX),
                DbValue::Decimal("12.50".into()),
                DbValue::Str("ünï ✓ 🦀".into()),
                DbValue::Str("v".into()),
                DbValue::Str("c ".into()),
                DbValue::Binary(vec![0, 255]),
                DbValue::Jsonb(br#"{"a":"x","b":[1,null]}"#.to_vec()),
                DbValue::Unsupported(br#"{"z": 1}"#.to_vec()),
            ])
        );
        assert_eq!(rows[1], debug([&[DbValue::Int32(2)][..], &vec![DbValue::DbNull; 9]].concat()));

        // Other types are listed, but reading them fails the query, naming the type.
        let (columns, rows, outcome) = query(&client, "SELECT id, flag FROM probe ORDER BY id", &[]).await.unwrap();
        assert_eq!(columns, ["id:DbDataType::Int32", "flag:DbDataType::Other(\"bool\")"]);
        let Err(PgError::QueryFailed(QueryError::Text(text))) = outcome else {
            panic!("expected query-failed, got {outcome:?}");
        };
        assert!(rows.is_empty() && text.contains("PostgreSQL type bool (column \"flag\")"), "{text}");
        let Err(PgError::QueryFailed(QueryError::Text(_))) = collect_rows(&client, "SELECT flag FROM probe", &[]).await
        else {
            panic!("expected query-failed");
        };

        // An empty result has no columns (they come from the first row).
        let (columns, rows, outcome) = query(&client, "SELECT id FROM probe WHERE id > 5", &[]).await.unwrap();
        assert!(columns.is_empty() && rows.is_empty() && outcome.is_ok());

        let (_, _, outcome) = query(&client, "SELEC 1", &[]).await.unwrap();
        let Err(PgError::QueryFailed(QueryError::DbError(db))) = outcome else {
            panic!("expected a structured error, got {outcome:?}");
        };
        assert_eq!(db.code, "42601");
        let set = collect_rows(&client, "SELECT count(*) AS n FROM probe", &[]).await.unwrap();
        assert_eq!(debug(&set.rows), debug(vec![vec![DbValue::Int64(2)]]));

        // Parameters of other types are refused as Spin refuses one it cannot convert.
        let uuid = [ParameterValue::Uuid("nope".into())];
        assert!(matches!(query(&client, "SELECT $1::uuid", &uuid).await, Err(PgError::BadParameter(_))));
        let flag = [ParameterValue::Boolean(true)];
        let refused = execute(&client, "UPDATE probe SET flag = $1", &flag).await;
        assert!(
            matches!(&refused, Err(PgError::ValueConversionFailed(text)) if text.contains("boolean")),
            "{refused:?}"
        );
    }

    #[test]
    fn an_instance_holds_at_most_1024_builders() {
        use wit::HostConnectionBuilder;
        let ctx = ctx(&[]);
        let mut table = wasmtime::component::ResourceTable::new();
        let mut view = CapabilityView { table: &mut table, ctx: &ctx };
        let builders: Vec<_> =
            (0..crate::capability::INSTANCE_TABLE_CAPACITY).map(|_| view.new("host=h".into()).unwrap()).collect();
        let refused = view.new("host=h".into()).map(|_| ()).unwrap_err();
        assert_eq!(refused.to_string(), "out of builder table space");
        let first = builders.into_iter().next().unwrap();
        view.delete(first).unwrap();
        assert!(view.new("host=h".into()).is_ok(), "a place is free again after a drop");
    }

    #[test]
    fn root_certificates_must_be_pem() {
        let Err(PgError::Other(text)) = parse_root_certificate("MIIB") else { panic!("accepted") };
        assert_eq!(text, "invalid root certificate: invalid root certificate");
    }

    /// The code of a message that has no type byte (a startup message or a
    /// TLS request): its first eight bytes are its length and the code.
    fn read_code(stream: &mut impl std::io::Read) -> Option<u32> {
        let mut head = [0u8; 8];
        stream.read_exact(&mut head).ok()?;
        Some(u32::from_be_bytes([head[4], head[5], head[6], head[7]]))
    }

    /// PostgreSQL's TLS request (`SSLRequest`) and protocol 3.0 startup codes.
    const TLS_REQUEST: u32 = 80_877_103;
    const STARTUP: u32 = 196_608;

    /// What a fake PostgreSQL server saw of the one connection it took.
    #[derive(Debug, PartialEq, Eq)]
    enum Seen {
        /// A startup message in plain TCP, with no TLS request before it.
        PlainStartup,
        /// A TLS request the server refused, then a startup message in plain TCP.
        RefusedThenPlainStartup,
        /// A TLS request the server refused, then nothing.
        RefusedThenNothing,
        /// A TLS request the server accepted, a handshake, then a startup message inside TLS.
        TlsStartup,
        /// A TLS request the server accepted, and a handshake the client broke off.
        HandshakeFailed,
        /// Anything else.
        Other(String),
    }

    /// A fake server on 127.0.0.1 that answers one client's TLS request (with
    /// `identity` it accepts, without it refuses) and reports what it saw.
    fn fake_server(identity: Option<native_tls::Identity>) -> (u16, std::thread::JoinHandle<Seen>) {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            stream.set_read_timeout(Some(std::time::Duration::from_secs(20))).unwrap();
            match (read_code(&mut stream), identity) {
                (Some(STARTUP), _) => Seen::PlainStartup,
                (Some(TLS_REQUEST), None) => {
                    stream.write_all(b"N").unwrap();
                    match read_code(&mut stream) {
                        Some(STARTUP) => Seen::RefusedThenPlainStartup,
                        None => Seen::RefusedThenNothing,
                        Some(code) => Seen::Other(format!("code {code} after a refusal")),
                    }
                }
                (Some(TLS_REQUEST), Some(identity)) => {
                    stream.write_all(b"S").unwrap();
                    match native_tls::TlsAcceptor::new(identity).unwrap().accept(stream) {
                        Ok(mut tls) => match read_code(&mut tls) {
                            Some(STARTUP) => Seen::TlsStartup,
                            other => Seen::Other(format!("{other:?} inside TLS")),
                        },
                        Err(_) => Seen::HandshakeFailed,
                    }
                }
                (other, _) => Seen::Other(format!("{other:?} first")),
            }
        });
        (port, seen)
    }

    /// Connects to a fake server as the guest would open `url` (the server's
    /// port put in), with `root_ca` given to the builder: the client's error
    /// text, if any, and what the server saw.
    async fn against_fake_server(
        identity: Option<native_tls::Identity>,
        url: &str,
        root_ca: Option<&str>,
    ) -> (Option<String>, Seen) {
        let (port, seen) = fake_server(identity);
        let url = url.replace("PORT", &port.to_string());
        let root_ca = root_ca.map(|pem| parse_root_certificate(pem).unwrap());
        let error = match connect(&url, root_ca, &ctx(&["postgres://*:*"])).await {
            Ok(_) => None,
            Err(PgError::ConnectionFailed(text)) => Some(text),
            Err(other) => Some(format!("not connection-failed: {other:?}")),
        };
        (error, seen.join().unwrap())
    }

    #[tokio::test]
    async fn tls_is_asked_for_unless_disabled_and_prefer_falls_back_only_when_refused() {
        // The server refuses TLS: `prefer` (the default) goes on in plain TCP,
        // `require` gives up, `disable` never asks.
        let (_, seen) = against_fake_server(None, "postgres://postgres@127.0.0.1:PORT/db", None).await;
        assert_eq!(seen, Seen::RefusedThenPlainStartup);
        let (_, seen) = against_fake_server(None, "postgres://postgres@127.0.0.1:PORT/db?sslmode=prefer", None).await;
        assert_eq!(seen, Seen::RefusedThenPlainStartup);
        let (error, seen) =
            against_fake_server(None, "postgres://postgres@127.0.0.1:PORT/db?sslmode=require", None).await;
        assert_eq!(seen, Seen::RefusedThenNothing);
        assert!(error.as_deref().is_some_and(|text| text.contains("server does not support TLS")), "{error:?}");
        let (_, seen) = against_fake_server(None, "host=127.0.0.1 port=PORT user=postgres sslmode=disable", None).await;
        assert_eq!(seen, Seen::PlainStartup);
    }

    #[tokio::test]
    async fn tls_certificates_are_verified_and_a_failed_handshake_is_not_retried_in_plain() {
        // Like Debian's default PostgreSQL certificate: self-signed, for `localhost`.
        let Some(certificate) = crate::test_tls::SelfSigned::make("pg-tls", "DNS:localhost") else {
            return;
        };
        let (cert, key) = (certificate.cert_pem(), certificate.key_pem());
        let identity = || Some(native_tls::Identity::from_pkcs8(cert.as_bytes(), key.as_bytes()).unwrap());
        let verify_failed = |error: &Option<String>| {
            error.as_deref().is_some_and(|text| {
                text.contains("error performing TLS handshake") && text.contains("certificate verify failed")
            })
        };

        // Not among the trusted roots: the handshake fails, and nothing more
        // is tried (the fake server takes one connection; a retry in plain
        // TCP would find nobody and fail differently).
        let (error, seen) = against_fake_server(identity(), "postgres://postgres@localhost:PORT/db", None).await;
        assert_eq!(seen, Seen::HandshakeFailed);
        assert!(verify_failed(&error), "{error:?}");
        // Trusted through `set-ca-root`, for the name the address uses: TLS.
        let (_, seen) = against_fake_server(identity(), "postgres://postgres@localhost:PORT/db", Some(&cert)).await;
        assert_eq!(seen, Seen::TlsStartup);
        // Trusted, but reached by another name: the name check fails it.
        let (error, seen) = against_fake_server(identity(), "postgres://postgres@127.0.0.1:PORT/db", Some(&cert)).await;
        assert_eq!(seen, Seen::HandshakeFailed);
        assert!(verify_failed(&error), "{error:?}");
        // `sslmode=disable` never asks for TLS.
        let (_, seen) =
            against_fake_server(identity(), "postgres://postgres@127.0.0.1:PORT/db?sslmode=disable", None).await;
        assert_eq!(seen, Seen::PlainStartup);
    }

    /// Whether the server at `address` (host:port) agrees to TLS, or `None` if nothing answers there.
    fn offers_tls(address: &str) -> Option<bool> {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(address).ok()?;
        let mut request = 8u32.to_be_bytes().to_vec();
        request.extend(TLS_REQUEST.to_be_bytes());
        stream.write_all(&request).ok()?;
        let mut answer = [0u8];
        stream.read_exact(&mut answer).ok()?;
        Some(answer[0] == b'S')
    }

    /// The machine's PostgreSQL (127.0.0.1:5432, user `postgres`), reached as
    /// the project's tests reach it: with TLS refused, the default `prefer`
    /// connects in plain TCP; with TLS offered (Debian's default, with its
    /// self-signed certificate for `localhost`), the default connects over TLS
    /// if the certificate passes and fails otherwise, never in plain TCP.
    /// `sslmode=disable` connects in plain TCP either way.
    #[tokio::test]
    async fn live_default_sslmode_against_the_machine_server() {
        let Some(tls_offered) = offers_tls("127.0.0.1:5432") else {
            eprintln!("skipping: no PostgreSQL server at 127.0.0.1:5432");
            return;
        };
        let hosts = ctx(&["postgres://127.0.0.1:5432"]);
        let uses_tls = |connection: PgConnection| async move {
            let set =
                collect_rows(&connection.client, "SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
                    .await
                    .unwrap();
            debug(&set.rows)
                == debug(vec![vec![crate::bindings::spin::postgres::postgres::DbValue::Str("true".into())]])
        };
        let plain = connect("postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", None, &hosts).await.unwrap();
        assert!(!uses_tls(plain).await);
        match connect("postgres://postgres@127.0.0.1:5432/postgres", None, &hosts).await {
            Ok(connection) => {
                assert_eq!(uses_tls(connection).await, tls_offered, "prefer without TLS although offered")
            }
            Err(PgError::ConnectionFailed(text)) => {
                assert!(tls_offered, "a server that refuses TLS failed the connection: {text}");
                assert!(text.contains("error performing TLS handshake"), "{text}");
                eprintln!("the machine's PostgreSQL offers TLS that fails verification here: {text}");
                let by_name = ctx(&["postgres://localhost:5432"]);
                let outcome = connect("postgres://postgres@localhost:5432/postgres", None, &by_name).await;
                eprintln!("reached as localhost, the default gives: {:?}", outcome.map(|_| "a connection"));
            }
            Err(other) => panic!("{other:?}"),
        }
    }
}
