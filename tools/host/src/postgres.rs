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
//! `allowed_outbound_hosts` (Unix sockets are refused). This host speaks plain
//! TCP only: `sslmode=prefer` (the default) connects without TLS,
//! `sslmode=require` fails, and a CA root given to `connection-builder` is
//! checked for PEM form but not used.
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
use crate::capability::{CapabilityHost, CapabilityView};
use crate::error::HostError;
use crate::outbound::{AllowedHosts, Denied};
use crate::sql::{self, ByteBudget, MAX_RESULT_BYTES, OtherError, QueryParts, RowSender};
use futures_util::StreamExt;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio_postgres::config::Host;
use tokio_postgres::{Client, Config, NoTls};
use types::SqlParam;
use wasmtime::component::{Accessor, Resource};

/// What a `connection` resource holds: a client on one connection.
pub struct PgConnection {
    client: Arc<Client>,
}

/// What a `connection-builder` resource holds: the address to connect to.
pub struct PgConnectionBuilder {
    address: String,
}

/// The component's `spin:postgres` settings.
#[derive(Clone)]
pub struct PgCtx {
    /// The component's resolved `allowed_outbound_hosts`.
    pub allowed_hosts: Arc<AllowedHosts>,
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
        let connection = connect(&address, &self.ctx.allowed_hosts).await?;
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
        self.push(PgConnectionBuilder { address })
    }

    /// Checks that `certificate` is PEM; without TLS, this host has no use for it.
    fn set_ca_root(&mut self, builder: Resource<PgConnectionBuilder>, certificate: String) -> Reply<()> {
        check_certificate(&certificate)
            .map_err(|reason| PgError::Other(format!("invalid root certificate: {reason}")))?;
        self.read(&builder, |_| ()).ok_or_else(no_builder)?;
        Ok(())
    }

    async fn build(&mut self, builder: Resource<PgConnectionBuilder>) -> Reply<Resource<PgConnection>> {
        let address = self.read(&builder, |held| held.address.clone()).ok_or_else(no_builder)?;
        wit::HostConnection::open(self, address).await
    }
}

impl<T> HostConnectionWithStore<T> for PgHost {
    async fn open_async(accessor: &Accessor<T, Self>, address: String) -> Reply<Resource<PgConnection>> {
        Self::open_resource(accessor, |ctx| async move { connect(&address, &ctx.allowed_hosts).await }).await
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
        let address = Self::read(accessor, &builder, |held| held.address.clone()).ok_or_else(no_builder)?;
        Self::open_async(accessor, address).await
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

/// Checks every host of `address` against `allowed_hosts` and connects.
async fn connect(address: &str, allowed_hosts: &AllowedHosts) -> Result<PgConnection, PgError> {
    let config = permitted_config(address, allowed_hosts)?;
    let (client, connection) =
        config.connect(NoTls).await.map_err(|e| PgError::ConnectionFailed(format!("{:#}", anyhow::Error::from(e))))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("unread-host: a postgres connection failed: {e}");
        }
    });
    Ok(PgConnection { client: Arc::new(client) })
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

/// A light check that `text` holds a PEM certificate.
fn check_certificate(text: &str) -> Result<(), String> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let start = text.find(BEGIN).ok_or("no PEM certificate found")?;
    let body = &text[start + BEGIN.len()..];
    let end = body.find(END).ok_or("unterminated PEM certificate")?;
    if body[..end].trim().is_empty() {
        return Err("empty PEM certificate".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(entries: &[&str]) -> AllowedHosts {
        AllowedHosts::parse("c", entries).unwrap()
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
    /// 127.0.0.1:5432 as `postgres` (trust authentication), database `test`.
    fn test_server() -> String {
        std::env::var("UNREAD_TEST_POSTGRES").unwrap_or_else(|_| "host=127.0.0.1 user=postgres dbname=test".into())
    }

    /// A client of [`test_server`], or `None` (the test is skipped) if there is none.
    async fn test_client() -> Option<Arc<Client>> {
        let address = test_server();
        match connect(&address, &allowed(&["postgres://*:*"])).await {
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
    fn certificates_need_pem_form() {
        assert!(check_certificate("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").is_ok());
        assert!(check_certificate("MIIB").is_err());
        assert!(check_certificate("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----").is_err());
        assert!(check_certificate("-----BEGIN CERTIFICATE-----\nMIIB").is_err());
    }
}
