//! The `spin:mysql/mysql@3.0.0` host: outbound MySQL / MariaDB for components.
//!
//! Each `connection.open` makes one fresh connection (Spin also opens a new
//! connection per `open`), used by one statement at a time; a `query` holds
//! it until its rows have been read or the stream dropped. Addresses are
//! `mysql://user:password@host[:port]/database` URLs; TLS (`ssl-mode`) is not
//! supported by this host.
//!
//! Types are mapped as Spin maps them: integer columns to the signed or
//! unsigned WIT case of their width (`TINYINT(1)`/`BOOLEAN` is `int8`),
//! `FLOAT`/`DOUBLE` to `floating32`/`floating64`, `CHAR`/`VARCHAR`/`TEXT` to
//! `str`, `BINARY`/`VARBINARY`/`BLOB` (and text with a binary collation) to
//! `binary`. Every other column type (`DECIMAL`, dates and times, `BIT`,
//! MySQL's `JSON`, ...) is `other`, and a non-NULL value in it fails the
//! query with `value-conversion-failed`, as in Spin; NULL is `db-null`
//! everywhere.

use crate::bindings::spin::mysql::mysql::{
    self as wit, Column, DbDataType, DbValue, Error as MysqlError, HostConnectionWithStore, ParameterValue, Row,
};
use crate::capability::{CapabilityHost, CapabilityView};
use crate::error::HostError;
use crate::outbound::{AllowedHosts, Denied};
use crate::sql::{self, ByteBudget, OtherError, QueryParts, RowSender};
use futures_util::TryStreamExt;
use mysql_async::consts::{ColumnFlags, ColumnType};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Params, Value};
use std::sync::Arc;
use tokio::sync::{Mutex, oneshot};
use wasmtime::component::{Accessor, Resource};

/// What a `connection` resource holds: one connection, used by one statement at a time.
pub struct MysqlConnection {
    conn: Arc<Mutex<Conn>>,
}

/// The component's `spin:mysql` settings.
#[derive(Clone)]
pub struct MysqlCtx {
    /// The component's resolved `allowed_outbound_hosts`.
    pub allowed_hosts: Arc<AllowedHosts>,
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
        Self::open_resource(accessor, |ctx| async move { connect(&address, &ctx.allowed_hosts).await }).await
    }

    async fn execute(
        accessor: &Accessor<T, Self>,
        connection: Resource<MysqlConnection>,
        statement: String,
        params: Vec<ParameterValue>,
    ) -> Reply<()> {
        let conn = Self::connection(accessor, &connection)?;
        let mut conn = conn.lock().await;
        Ok(conn.exec_batch(statement, [to_params(params)]).await.map_err(query_failed)?)
    }

    async fn query(
        accessor: &Accessor<T, Self>,
        connection: Resource<MysqlConnection>,
        statement: String,
        params: Vec<ParameterValue>,
    ) -> Reply<QueryParts<Vec<Column>, Row, MysqlError>> {
        let conn = Self::connection(accessor, &connection)?;
        let params = to_params(params);
        sql::stream_query(accessor, move |columns, rows| run_query(conn, statement, params, columns, rows)).await
    }

    async fn drop(accessor: &Accessor<T, Self>, rep: Resource<MysqlConnection>) -> wasmtime::Result<()> {
        Self::delete(accessor, rep)
    }
}

/// Checks `address` against `allowed_hosts` and connects.
async fn connect(address: &str, allowed_hosts: &AllowedHosts) -> Result<MysqlConnection, MysqlError> {
    allowed_hosts.permit(address, "mysql").map_err(|denied| match denied {
        Denied::NotAllowed => MysqlError::ConnectionFailed(format!("address {address} is not permitted")),
        Denied::CheckFailed(reason) => MysqlError::Other(reason),
    })?;
    let opts = connection_opts(address).map_err(MysqlError::ConnectionFailed)?;
    let conn = Conn::new(opts).await.map_err(|e| MysqlError::ConnectionFailed(e.to_string()))?;
    Ok(MysqlConnection { conn: Arc::new(Mutex::new(conn)) })
}

/// Connection options from a `mysql://` URL, without its `ssl-mode` parameter.
///
/// A TLS mode other than `DISABLED` is refused: this host has no TLS.
fn connection_opts(address: &str) -> Result<Opts, String> {
    let mut url = url::Url::parse(address).map_err(|e| format!("invalid MySQL URL: {e}"))?;
    let is_ssl = |key: &str| matches!(key.to_ascii_lowercase().as_str(), "ssl-mode" | "sslmode");
    let (ssl, rest): (Vec<_>, Vec<_>) =
        url.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).partition(|(k, _)| is_ssl(k));
    if ssl.iter().any(|(_, mode)| !mode.eq_ignore_ascii_case("disabled")) {
        return Err("TLS (ssl-mode) is not supported by unread-host".to_owned());
    }
    url.set_query(None);
    if !rest.is_empty() {
        url.query_pairs_mut().extend_pairs(rest);
    }
    Opts::from_url(url.as_str()).map_err(|e| e.to_string())
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
    let columns: Vec<Column> = result.columns().map(|columns| columns.iter().map(column).collect()).unwrap_or_default();
    let _ = columns_out.send(columns.clone());
    let mut stream = result
        .stream::<mysql_async::Row>()
        .await
        .map_err(|e| MysqlError::Other(e.to_string()))?
        .ok_or_else(|| MysqlError::Other("unable to stream query result".to_owned()))?;
    let mut budget = ByteBudget::default();
    while let Some(row) = stream.try_next().await.map_err(|e| MysqlError::Other(e.to_string()))? {
        let row = convert_row(row, &columns)?;
        budget.charge(row.iter().map(value_size).sum()).map_err(MysqlError::Other)?;
        rows.send(row).await.map_err(|closed| MysqlError::Other(format!("async error: {closed}")))?;
    }
    Ok(())
}

/// `query-failed` with the driver's error, as Spin reports it.
fn query_failed(error: mysql_async::Error) -> MysqlError {
    MysqlError::QueryFailed(format!("{error:?}"))
}

/// Positional statement parameters.
fn to_params(params: Vec<ParameterValue>) -> Params {
    Params::Positional(params.into_iter().map(to_value).collect())
}

/// One statement parameter as a MySQL value (booleans are integers 0/1).
fn to_value(param: ParameterValue) -> Value {
    match param {
        ParameterValue::Boolean(v) => Value::from(v),
        ParameterValue::Int8(v) => Value::from(v),
        ParameterValue::Int16(v) => Value::from(v),
        ParameterValue::Int32(v) => Value::from(v),
        ParameterValue::Int64(v) => Value::from(v),
        ParameterValue::Uint8(v) => Value::from(v),
        ParameterValue::Uint16(v) => Value::from(v),
        ParameterValue::Uint32(v) => Value::from(v),
        ParameterValue::Uint64(v) => Value::from(v),
        ParameterValue::Floating32(v) => Value::from(v),
        ParameterValue::Floating64(v) => Value::from(v),
        ParameterValue::Str(v) => Value::from(v),
        ParameterValue::Binary(v) => Value::from(v),
        ParameterValue::DbNull => Value::NULL,
    }
}

/// A result column: its name and WIT data type.
fn column(column: &mysql_async::Column) -> Column {
    Column { name: column.name_str().into_owned(), data_type: data_type(column.column_type(), column.flags()) }
}

/// The WIT data type of a column of `column_type` with `flags`.
fn data_type(column_type: ColumnType, flags: ColumnFlags) -> DbDataType {
    let unsigned = flags.contains(ColumnFlags::UNSIGNED_FLAG);
    let binary = flags.contains(ColumnFlags::BINARY_FLAG);
    match column_type {
        ColumnType::MYSQL_TYPE_TINY if unsigned => DbDataType::Uint8,
        ColumnType::MYSQL_TYPE_TINY => DbDataType::Int8,
        ColumnType::MYSQL_TYPE_SHORT if unsigned => DbDataType::Uint16,
        ColumnType::MYSQL_TYPE_SHORT => DbDataType::Int16,
        ColumnType::MYSQL_TYPE_INT24 | ColumnType::MYSQL_TYPE_LONG if unsigned => DbDataType::Uint32,
        ColumnType::MYSQL_TYPE_INT24 | ColumnType::MYSQL_TYPE_LONG => DbDataType::Int32,
        ColumnType::MYSQL_TYPE_LONGLONG if unsigned => DbDataType::Uint64,
        ColumnType::MYSQL_TYPE_LONGLONG => DbDataType::Int64,
        ColumnType::MYSQL_TYPE_FLOAT => DbDataType::Floating32,
        ColumnType::MYSQL_TYPE_DOUBLE => DbDataType::Floating64,
        ColumnType::MYSQL_TYPE_STRING | ColumnType::MYSQL_TYPE_VAR_STRING | ColumnType::MYSQL_TYPE_BLOB if binary => {
            DbDataType::Binary
        }
        ColumnType::MYSQL_TYPE_STRING | ColumnType::MYSQL_TYPE_VAR_STRING | ColumnType::MYSQL_TYPE_BLOB => {
            DbDataType::Str
        }
        _ => DbDataType::Other,
    }
}

/// Converts one result row; `columns` are the result's columns.
fn convert_row(row: mysql_async::Row, columns: &[Column]) -> Result<Row, MysqlError> {
    let values = row.unwrap();
    if values.len() > columns.len() {
        let index = columns.len();
        return Err(MysqlError::Other(format!("Can't get column at index {index}")));
    }
    values.into_iter().zip(columns).map(|(value, column)| convert_value(value, column)).collect()
}

/// Converts one value of `column`.
fn convert_value(value: Value, column: &Column) -> Result<DbValue, MysqlError> {
    if value == Value::NULL {
        return Ok(DbValue::DbNull);
    }
    match column.data_type {
        DbDataType::Boolean => from_value(value).map(DbValue::Boolean),
        DbDataType::Int8 => from_value(value).map(DbValue::Int8),
        DbDataType::Int16 => from_value(value).map(DbValue::Int16),
        DbDataType::Int32 => from_value(value).map(DbValue::Int32),
        DbDataType::Int64 => from_value(value).map(DbValue::Int64),
        DbDataType::Uint8 => from_value(value).map(DbValue::Uint8),
        DbDataType::Uint16 => from_value(value).map(DbValue::Uint16),
        DbDataType::Uint32 => from_value(value).map(DbValue::Uint32),
        DbDataType::Uint64 => from_value(value).map(DbValue::Uint64),
        DbDataType::Floating32 => from_value(value).map(DbValue::Floating32),
        DbDataType::Floating64 => from_value(value).map(DbValue::Floating64),
        DbDataType::Str => from_value(value).map(DbValue::Str),
        DbDataType::Binary => from_value(value).map(DbValue::Binary),
        DbDataType::Other => Err(MysqlError::ValueConversionFailed(format!(
            "Cannot convert value {value:?} in column {} data type {:?}",
            column.name, column.data_type
        ))),
    }
}

/// `value` as `V`, or `value-conversion-failed`.
fn from_value<V: mysql_async::prelude::FromValue>(value: Value) -> Result<V, MysqlError> {
    mysql_async::from_value_opt(value).map_err(|e| MysqlError::ValueConversionFailed(e.to_string()))
}

/// The bytes a value counts for against [`sql::MAX_RESULT_BYTES`].
fn value_size(value: &DbValue) -> usize {
    let payload = match value {
        DbValue::Str(text) => text.len(),
        DbValue::Binary(bytes) => bytes.len(),
        _ => 0,
    };
    std::mem::size_of::<DbValue>() + payload
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column_of(data_type: DbDataType) -> Column {
        Column { name: "c".into(), data_type }
    }

    fn debug<D: std::fmt::Debug>(value: D) -> String {
        format!("{value:?}")
    }

    #[test]
    fn integer_columns_keep_width_and_sign() {
        let signed = ColumnFlags::empty();
        let unsigned = ColumnFlags::UNSIGNED_FLAG;
        let cases = [
            (ColumnType::MYSQL_TYPE_TINY, signed, DbDataType::Int8),
            (ColumnType::MYSQL_TYPE_TINY, unsigned, DbDataType::Uint8),
            (ColumnType::MYSQL_TYPE_SHORT, signed, DbDataType::Int16),
            (ColumnType::MYSQL_TYPE_SHORT, unsigned, DbDataType::Uint16),
            (ColumnType::MYSQL_TYPE_INT24, signed, DbDataType::Int32),
            (ColumnType::MYSQL_TYPE_INT24, unsigned, DbDataType::Uint32),
            (ColumnType::MYSQL_TYPE_LONG, signed, DbDataType::Int32),
            (ColumnType::MYSQL_TYPE_LONG, unsigned, DbDataType::Uint32),
            (ColumnType::MYSQL_TYPE_LONGLONG, signed, DbDataType::Int64),
            (ColumnType::MYSQL_TYPE_LONGLONG, unsigned, DbDataType::Uint64),
            (ColumnType::MYSQL_TYPE_FLOAT, signed, DbDataType::Floating32),
            (ColumnType::MYSQL_TYPE_DOUBLE, unsigned, DbDataType::Floating64),
        ];
        for (column_type, flags, expected) in cases {
            assert_eq!(debug(data_type(column_type, flags)), debug(expected), "{column_type:?} {flags:?}");
        }
    }

    #[test]
    fn character_columns_are_text_unless_binary() {
        let binary = ColumnFlags::BINARY_FLAG;
        for column_type in
            [ColumnType::MYSQL_TYPE_STRING, ColumnType::MYSQL_TYPE_VAR_STRING, ColumnType::MYSQL_TYPE_BLOB]
        {
            assert_eq!(debug(data_type(column_type, ColumnFlags::empty())), debug(DbDataType::Str));
            assert_eq!(debug(data_type(column_type, binary)), debug(DbDataType::Binary));
        }
    }

    #[test]
    fn other_column_types_are_other() {
        for column_type in [
            ColumnType::MYSQL_TYPE_NEWDECIMAL,
            ColumnType::MYSQL_TYPE_DATETIME,
            ColumnType::MYSQL_TYPE_TIMESTAMP,
            ColumnType::MYSQL_TYPE_DATE,
            ColumnType::MYSQL_TYPE_JSON,
            ColumnType::MYSQL_TYPE_BIT,
            ColumnType::MYSQL_TYPE_YEAR,
            ColumnType::MYSQL_TYPE_LONG_BLOB,
            ColumnType::MYSQL_TYPE_NULL,
        ] {
            assert_eq!(debug(data_type(column_type, ColumnFlags::empty())), debug(DbDataType::Other));
        }
    }

    #[test]
    fn values_convert_to_their_column_type() {
        let convert = |value: Value, data_type| debug(convert_value(value, &column_of(data_type)).unwrap());
        assert_eq!(convert(Value::Int(-128), DbDataType::Int8), debug(DbValue::Int8(-128)));
        assert_eq!(convert(Value::Int(1), DbDataType::Int8), debug(DbValue::Int8(1)));
        assert_eq!(convert(Value::UInt(u64::MAX), DbDataType::Uint64), debug(DbValue::Uint64(u64::MAX)));
        assert_eq!(convert(Value::Int(i64::MIN), DbDataType::Int64), debug(DbValue::Int64(i64::MIN)));
        assert_eq!(convert(Value::Int(65535), DbDataType::Uint16), debug(DbValue::Uint16(65535)));
        assert_eq!(convert(Value::Float(1.5), DbDataType::Floating32), debug(DbValue::Floating32(1.5)));
        assert_eq!(convert(Value::Double(-2.25), DbDataType::Floating64), debug(DbValue::Floating64(-2.25)));
        assert_eq!(convert(Value::from("héllo ✓"), DbDataType::Str), debug(DbValue::Str("héllo ✓".into())));
        assert_eq!(convert(Value::Bytes(vec![0, 255]), DbDataType::Binary), debug(DbValue::Binary(vec![0, 255])));
        assert_eq!(convert(Value::NULL, DbDataType::Other), debug(DbValue::DbNull));
        assert_eq!(convert(Value::NULL, DbDataType::Int32), debug(DbValue::DbNull));
    }

    #[test]
    fn unconvertible_values_fail() {
        let fails = |value: Value, data_type| {
            matches!(convert_value(value, &column_of(data_type)), Err(MysqlError::ValueConversionFailed(_)))
        };
        assert!(fails(Value::Int(300), DbDataType::Int8), "out of range");
        assert!(fails(Value::Int(-1), DbDataType::Uint32), "negative into unsigned");
        assert!(fails(Value::Bytes(vec![0xff, 0xfe]), DbDataType::Str), "not UTF-8");
        assert!(fails(Value::from("12.50"), DbDataType::Other), "DECIMAL and friends");
        assert!(fails(Value::Date(2024, 1, 2, 3, 4, 5, 0), DbDataType::Other));
    }

    #[test]
    fn parameters_map_to_mysql_values() {
        assert_eq!(to_value(ParameterValue::Boolean(true)), Value::Int(1));
        assert_eq!(to_value(ParameterValue::Uint64(u64::MAX)), Value::UInt(u64::MAX));
        assert_eq!(to_value(ParameterValue::Int8(-5)), Value::Int(-5));
        assert_eq!(to_value(ParameterValue::Floating32(0.5)), Value::Float(0.5));
        assert_eq!(to_value(ParameterValue::Str("ü".into())), Value::Bytes("ü".as_bytes().to_vec()));
        assert_eq!(to_value(ParameterValue::Binary(vec![1])), Value::Bytes(vec![1]));
        assert_eq!(to_value(ParameterValue::DbNull), Value::NULL);
    }

    #[test]
    fn addresses_become_options() {
        let opts = connection_opts("mysql://root:pw@127.0.0.1:3307/test").unwrap();
        assert_eq!(opts.ip_or_hostname(), "127.0.0.1");
        assert_eq!(opts.tcp_port(), 3307);
        assert_eq!(opts.user(), Some("root"));
        assert_eq!(opts.db_name(), Some("test"));
        assert!(connection_opts("mysql://h/db?ssl-mode=DISABLED").is_ok());
        assert!(connection_opts("mysql://h/db?sslMode=REQUIRED").is_err(), "no TLS here");
        assert!(connection_opts("host=h user=u").is_err());
        assert!(connection_opts("mysql://h/db?no_such_option=1").is_err());
    }

    /// The server for the live tests: `UNREAD_TEST_MYSQL`, or MariaDB/MySQL on
    /// 127.0.0.1:3306 as root without a password, database `test`.
    fn test_server() -> String {
        std::env::var("UNREAD_TEST_MYSQL").unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
    }

    /// A connection to [`test_server`], or `None` (the test is skipped) if there is none.
    async fn test_connection() -> Option<MysqlConnection> {
        let address = test_server();
        let allowed = AllowedHosts::parse("test", &["mysql://*:*"]).unwrap();
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
        let outcome = run_query(conn.conn.clone(), statement.to_owned(), to_params(params), columns_tx, sender).await;
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
        conn.exec_batch(statement, [to_params(params)]).await.unwrap();
    }

    #[tokio::test]
    async fn live_values_round_trip() {
        let Some(conn) = test_connection().await else {
            return;
        };
        execute(
            &conn,
            "CREATE TEMPORARY TABLE probe (id INT, flag BOOLEAN, tiny TINYINT UNSIGNED, big BIGINT, \
             ubig BIGINT UNSIGNED, f FLOAT, d DOUBLE, s VARCHAR(50), bin VARBINARY(8), amount DECIMAL(6,2)) \
             CHARACTER SET utf8mb4",
            vec![],
        )
        .await;
        let insert = "INSERT INTO probe VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
        let values = vec![
            ParameterValue::Int32(1),
            ParameterValue::Boolean(true),
            ParameterValue::Uint8(255),
            ParameterValue::Int64(i64::MIN),
            ParameterValue::Uint64(u64::MAX),
            ParameterValue::Floating32(0.5),
            ParameterValue::Floating64(-1.25),
            ParameterValue::Str("ünï ✓ 🦀".into()),
            ParameterValue::Binary(vec![0, 255]),
            ParameterValue::Str("9.99".into()),
        ];
        execute(&conn, insert, values).await;
        let mut nulls = vec![ParameterValue::Int32(2)];
        nulls.extend(std::iter::repeat_n(ParameterValue::DbNull, 9));
        execute(&conn, insert, nulls).await;

        let (columns, rows, outcome) =
            query(&conn, "SELECT id, flag, tiny, big, ubig, f, d, s, bin FROM probe ORDER BY id", vec![]).await;
        outcome.unwrap();
        assert_eq!(
            columns.join(" "),
            "id:DbDataType::Int32 flag:DbDataType::Int8 tiny:DbDataType::Uint8 big:DbDataType::Int64 \
             ubig:DbDataType::Uint64 f:DbDataType::Floating32 d:DbDataType::Floating64 s:DbDataType::Str \
             bin:DbDataType::Binary"
        );
        assert_eq!(
            rows[0],
            debug(vec![
                DbValue::Int32(1),
                DbValue::Int8(1),
                DbValue::Uint8(255),
                DbValue::Int64(i64::MIN),
                DbValue::Uint64(u64::MAX),
                DbValue::Floating32(0.5),
                DbValue::Floating64(-1.25),
                DbValue::Str("ünï ✓ 🦀".into()),
                DbValue::Binary(vec![0, 255]),
            ])
        );
        assert_eq!(rows[1], debug([&[DbValue::Int32(2)][..], &vec![DbValue::DbNull; 8]].concat()));

        // DECIMAL (like dates, BIT, ...) is `other`: NULL reads, a value fails the query.
        let (_, rows, outcome) = query(&conn, "SELECT amount FROM probe ORDER BY id DESC", vec![]).await;
        assert_eq!(rows, [debug(vec![DbValue::DbNull])]);
        assert!(matches!(outcome, Err(MysqlError::ValueConversionFailed(_))), "{outcome:?}");

        let (columns, rows, outcome) = query(&conn, "SELECT id FROM probe WHERE id > 5", vec![]).await;
        assert_eq!((columns.len(), rows.len()), (1, 0));
        outcome.unwrap();

        let (_, _, outcome) = query(&conn, "SELEC nope", vec![]).await;
        assert!(matches!(outcome, Err(MysqlError::QueryFailed(_))), "{outcome:?}");
    }

    #[tokio::test]
    async fn addresses_outside_allowed_hosts_are_refused() {
        let allowed = AllowedHosts::parse("c", &["mysql://127.0.0.1:3306"]).unwrap();
        let Err(MysqlError::ConnectionFailed(text)) = connect("mysql://root@10.9.9.9/test", &allowed).await else {
            panic!("expected connection-failed");
        };
        assert_eq!(text, "address mysql://root@10.9.9.9/test is not permitted");
    }
}
