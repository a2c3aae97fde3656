//! MySQL values and the `spin:mysql@3.0.0` WIT types: the types unread's core
//! sends and reads, converted as Spin 4.1 converts them
//! (`crates/factor-outbound-mysql/src/client.rs`).
//!
//! | MySQL column (wire type)                                  | `db-data-type` and `db-value`     |
//! |-----------------------------------------------------------|-----------------------------------|
//! | `TINYINT` (so `BOOLEAN`), `SMALLINT`, `INT`/`MEDIUMINT`, `BIGINT` | `int8`, `int16`, `int32`, `int64`; `uint…` if `UNSIGNED` |
//! | `CHAR`, `VARCHAR`, `TEXT` (`STRING`, `VAR_STRING`, `BLOB`) | `str`                             |
//! | the same with the binary flag (`BINARY`, `VARBINARY`, `BLOB`), `MEDIUM_BLOB`, `LONG_BLOB` | `binary` |
//!
//! NULL is `db-null` in every column. Every other column type is `other`,
//! and a value in it fails the query with `value-conversion-failed` naming
//! the type: Spin does that too, except for `FLOAT` / `DOUBLE`, which it
//! converts to `floating32` / `floating64`.
//!
//! Parameters: `str`, `int64` and `db-null`. Any other one is refused with
//! `bad-parameter` naming its type (Spin sends every WIT parameter type).
//!
//! To support another type, add its arms to [`data_type`] and
//! [`convert_value`] (results) or [`to_value`] (parameters).

use crate::bindings::spin::mysql::mysql::{Column, DbDataType, DbValue, Error as MysqlError, ParameterValue, Row};
use crate::sql::case_name;
use mysql_async::consts::{ColumnFlags, ColumnType};
use mysql_async::prelude::FromValue;
use mysql_async::{Params, Value};

/// Positional statement parameters; the error names the first unsupported one.
pub fn to_params(params: Vec<ParameterValue>) -> Result<Params, MysqlError> {
    Ok(Params::Positional(params.into_iter().map(to_value).collect::<Result<_, _>>()?))
}

/// One statement parameter as a MySQL value.
fn to_value(param: ParameterValue) -> Result<Value, MysqlError> {
    Ok(match param {
        ParameterValue::Int64(v) => Value::from(v),
        ParameterValue::Str(v) => Value::from(v),
        ParameterValue::DbNull => Value::NULL,
        other => {
            return Err(MysqlError::BadParameter(format!(
                "unread-host does not send {} parameters to MySQL; see tools/host/src/mysql/types.rs",
                case_name(&other)
            )));
        }
    })
}

/// A result column: its name and WIT data type.
pub fn column(column: &mysql_async::Column) -> Column {
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
        ColumnType::MYSQL_TYPE_STRING | ColumnType::MYSQL_TYPE_VAR_STRING | ColumnType::MYSQL_TYPE_BLOB if binary => {
            DbDataType::Binary
        }
        ColumnType::MYSQL_TYPE_STRING | ColumnType::MYSQL_TYPE_VAR_STRING | ColumnType::MYSQL_TYPE_BLOB => {
            DbDataType::Str
        }
        ColumnType::MYSQL_TYPE_MEDIUM_BLOB | ColumnType::MYSQL_TYPE_LONG_BLOB => DbDataType::Binary,
        _ => DbDataType::Other,
    }
}

/// Converts one result row; `columns` are the result's columns.
pub fn convert_row(row: mysql_async::Row, columns: &[mysql_async::Column]) -> Result<Row, MysqlError> {
    let values = row.unwrap();
    if values.len() > columns.len() {
        let index = columns.len();
        return Err(MysqlError::Other(format!("Can't get column at index {index}")));
    }
    values.into_iter().zip(columns).map(|(value, column)| convert_value(value, column)).collect()
}

/// Converts one value of `column`.
fn convert_value(value: Value, column: &mysql_async::Column) -> Result<DbValue, MysqlError> {
    if value == Value::NULL {
        return Ok(DbValue::DbNull);
    }
    match data_type(column.column_type(), column.flags()) {
        DbDataType::Int8 => from_value(value).map(DbValue::Int8),
        DbDataType::Int16 => from_value(value).map(DbValue::Int16),
        DbDataType::Int32 => from_value(value).map(DbValue::Int32),
        DbDataType::Int64 => from_value(value).map(DbValue::Int64),
        DbDataType::Uint8 => from_value(value).map(DbValue::Uint8),
        DbDataType::Uint16 => from_value(value).map(DbValue::Uint16),
        DbDataType::Uint32 => from_value(value).map(DbValue::Uint32),
        DbDataType::Uint64 => from_value(value).map(DbValue::Uint64),
        DbDataType::Str => from_value(value).map(DbValue::Str),
        DbDataType::Binary => from_value(value).map(DbValue::Binary),
        _ => Err(MysqlError::ValueConversionFailed(format!(
            "Cannot convert value {value:?} in column {}: unread-host does not read MySQL type {:?}; \
             see tools/host/src/mysql/types.rs",
            column.name_str(),
            column.column_type()
        ))),
    }
}

/// `value` as `V`, or `value-conversion-failed`.
fn from_value<V: FromValue>(value: Value) -> Result<V, MysqlError> {
    mysql_async::from_value_opt(value).map_err(|e| MysqlError::ValueConversionFailed(e.to_string()))
}

/// The bytes a value counts for against the result size limit (Spin's `memory_size`).
pub fn value_size(value: &DbValue) -> usize {
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

    fn debug<D: std::fmt::Debug>(value: D) -> String {
        format!("{value:?}")
    }

    fn convert(value: Value, column_type: ColumnType, flags: ColumnFlags) -> Result<DbValue, MysqlError> {
        convert_value(value, &mysql_async::Column::new(column_type).with_name(b"c").with_flags(flags))
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
        for column_type in [ColumnType::MYSQL_TYPE_MEDIUM_BLOB, ColumnType::MYSQL_TYPE_LONG_BLOB] {
            assert_eq!(debug(data_type(column_type, ColumnFlags::empty())), debug(DbDataType::Binary));
        }
    }

    #[test]
    fn other_column_types_are_other() {
        for column_type in [
            ColumnType::MYSQL_TYPE_FLOAT,
            ColumnType::MYSQL_TYPE_DOUBLE,
            ColumnType::MYSQL_TYPE_NEWDECIMAL,
            ColumnType::MYSQL_TYPE_DATETIME,
            ColumnType::MYSQL_TYPE_TIMESTAMP,
            ColumnType::MYSQL_TYPE_DATE,
            ColumnType::MYSQL_TYPE_JSON,
            ColumnType::MYSQL_TYPE_BIT,
            ColumnType::MYSQL_TYPE_YEAR,
            ColumnType::MYSQL_TYPE_TINY_BLOB,
            ColumnType::MYSQL_TYPE_NULL,
        ] {
            assert_eq!(debug(data_type(column_type, ColumnFlags::empty())), debug(DbDataType::Other));
        }
    }

    #[test]
    fn values_convert_to_their_column_type() {
        let ok = |value, column_type, flags| debug(convert(value, column_type, flags).unwrap());
        let (signed, unsigned, binary) = (ColumnFlags::empty(), ColumnFlags::UNSIGNED_FLAG, ColumnFlags::BINARY_FLAG);
        assert_eq!(ok(Value::Int(-128), ColumnType::MYSQL_TYPE_TINY, signed), debug(DbValue::Int8(-128)));
        assert_eq!(
            ok(Value::UInt(u64::MAX), ColumnType::MYSQL_TYPE_LONGLONG, unsigned),
            debug(DbValue::Uint64(u64::MAX))
        );
        assert_eq!(ok(Value::Int(i64::MIN), ColumnType::MYSQL_TYPE_LONGLONG, signed), debug(DbValue::Int64(i64::MIN)));
        assert_eq!(ok(Value::Int(65535), ColumnType::MYSQL_TYPE_SHORT, unsigned), debug(DbValue::Uint16(65535)));
        let text = ok(Value::from("héllo ✓"), ColumnType::MYSQL_TYPE_VAR_STRING, signed);
        assert_eq!(text, debug(DbValue::Str("héllo ✓".into())));
        let bytes = ok(Value::Bytes(vec![0, 255]), ColumnType::MYSQL_TYPE_BLOB, binary);
        assert_eq!(bytes, debug(DbValue::Binary(vec![0, 255])));
        assert_eq!(ok(Value::NULL, ColumnType::MYSQL_TYPE_NEWDECIMAL, signed), debug(DbValue::DbNull));
        assert_eq!(ok(Value::NULL, ColumnType::MYSQL_TYPE_LONG, signed), debug(DbValue::DbNull));
    }

    #[test]
    fn unconvertible_values_fail() {
        let fails = |value, column_type, flags| {
            matches!(convert(value, column_type, flags), Err(MysqlError::ValueConversionFailed(_)))
        };
        let (signed, unsigned) = (ColumnFlags::empty(), ColumnFlags::UNSIGNED_FLAG);
        assert!(fails(Value::Int(300), ColumnType::MYSQL_TYPE_TINY, signed), "out of range");
        assert!(fails(Value::Int(-1), ColumnType::MYSQL_TYPE_LONG, unsigned), "negative into unsigned");
        assert!(fails(Value::Bytes(vec![0xff, 0xfe]), ColumnType::MYSQL_TYPE_VAR_STRING, signed), "not UTF-8");
        assert!(fails(Value::Date(2024, 1, 2, 3, 4, 5, 0), ColumnType::MYSQL_TYPE_DATETIME, signed));
        let Err(MysqlError::ValueConversionFailed(text)) =
            convert(Value::from("12.50"), ColumnType::MYSQL_TYPE_NEWDECIMAL, signed)
        else {
            panic!("DECIMAL converted");
        };
        assert!(text.contains("column c") && text.contains("MYSQL_TYPE_NEWDECIMAL"), "{text}");
    }

    #[test]
    fn parameters_map_to_mysql_values() {
        assert_eq!(to_value(ParameterValue::Int64(-5)).unwrap(), Value::Int(-5));
        assert_eq!(to_value(ParameterValue::Str("ü".into())).unwrap(), Value::Bytes("ü".as_bytes().to_vec()));
        assert_eq!(to_value(ParameterValue::DbNull).unwrap(), Value::NULL);
        let Err(MysqlError::BadParameter(text)) =
            to_params(vec![ParameterValue::Str("x".into()), ParameterValue::Uint8(1)])
        else {
            panic!("uint8 sent");
        };
        assert!(text.contains(" uint8 parameters"), "{text}");
    }
}
