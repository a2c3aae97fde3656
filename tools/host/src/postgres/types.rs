//! PostgreSQL values and the `spin:postgres@4.2.0` WIT types: the types
//! unread's core sends and reads, converted as Spin 4.1 converts them
//! (`crates/factor-outbound-pg/src/types.rs`).
//!
//! | PostgreSQL                   | column `db-data-type`     | value `db-value`              |
//! |------------------------------|---------------------------|-------------------------------|
//! | `int2`, `int4`, `int8`       | `int16`, `int32`, `int64` | `int16`, `int32`, `int64`     |
//! | `numeric`                    | `decimal`                 | `decimal` (base-10 text)      |
//! | `text`, `varchar`, `char(n)` | `str`                     | `str`                         |
//! | `bytea`                      | `binary`                  | `binary`                      |
//! | `jsonb`                      | `jsonb`                   | `jsonb` (compact JSON text)   |
//! | `json`                       | `other("json")`           | `unsupported` (the JSON text) |
//!
//! NULL is `db-null` in each of them. A column of any other type is listed as
//! `other(type name)`, and a row with it fails the query with `query-failed`
//! naming the type (Spin would convert it; cast it in SQL, or add the type).
//!
//! Parameters: `str` is sent as `text`, `int64` as `int8`, `db-null` as NULL
//! of any type. Any other parameter is refused, naming its type, the way Spin
//! refuses a parameter it cannot convert (see `postgres.rs`).
//!
//! To support another type, add its arm to [`column_type`] (results) or
//! [`to_sql_param`] (parameters), with the conversion Spin uses for it.

use crate::bindings::spin::postgres::postgres::{Column, DbDataType, DbValue, ParameterValue};
use crate::sql::case_name;
use anyhow::{Result, anyhow, bail};
use bytes::BytesMut;
use rust_decimal::Decimal;
use std::error::Error as StdError;
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type};

/// A statement parameter ready for the driver.
pub type SqlParam = Box<dyn ToSql + Send + Sync>;

/// Reads the value in column `index` of a row as a WIT value.
type Reader = fn(&Row, usize) -> Result<DbValue, tokio_postgres::Error>;

/// The WIT data type of PostgreSQL type `ty` and how its values are read;
/// `None` for the types this host does not convert.
fn column_type(ty: &Type) -> Option<(DbDataType, Reader)> {
    let converted: (DbDataType, Reader) = match *ty {
        Type::INT2 => (DbDataType::Int16, |row, i| read(row, i, DbValue::Int16)),
        Type::INT4 => (DbDataType::Int32, |row, i| read(row, i, DbValue::Int32)),
        Type::INT8 => (DbDataType::Int64, |row, i| read(row, i, DbValue::Int64)),
        Type::NUMERIC => (DbDataType::Decimal, |row, i| read(row, i, |v: Decimal| DbValue::Decimal(v.to_string()))),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR => (DbDataType::Str, |row, i| read(row, i, DbValue::Str)),
        Type::BYTEA => (DbDataType::Binary, |row, i| read(row, i, DbValue::Binary)),
        Type::JSONB => (DbDataType::Jsonb, |row, i| {
            read(row, i, |v: serde_json::Value| DbValue::Jsonb(v.to_string().into_bytes()))
        }),
        Type::JSON => (DbDataType::Other("json".to_owned()), |row, i| read(row, i, |v: Raw| DbValue::Unsupported(v.0))),
        _ => return None,
    };
    Some(converted)
}

/// Reads column `index` of `row` as `V` and wraps it with `wrap`; NULL is `db-null`.
fn read<'a, V: FromSql<'a>>(
    row: &'a Row,
    index: usize,
    wrap: impl FnOnce(V) -> DbValue,
) -> Result<DbValue, tokio_postgres::Error> {
    Ok(row.try_get::<_, Option<V>>(index)?.map_or(DbValue::DbNull, wrap))
}

/// The columns of the result `row` belongs to.
pub fn columns(row: &Row) -> Vec<Column> {
    row.columns()
        .iter()
        .map(|column| {
            let ty = column.type_();
            let data_type = column_type(ty).map_or_else(|| DbDataType::Other(ty.name().to_owned()), |(t, _)| t);
            Column { name: column.name().to_owned(), data_type }
        })
        .collect()
}

/// Converts every value of `row`; a column of a type without a [`column_type`] fails.
pub fn convert_row(row: &Row) -> Result<Vec<DbValue>> {
    let convert = |(index, column): (usize, &tokio_postgres::Column)| {
        let Some((_, reader)) = column_type(column.type_()) else {
            bail!(
                "unread-host does not read PostgreSQL type {} (column {:?}); see tools/host/src/postgres/types.rs",
                column.type_().name(),
                column.name()
            );
        };
        Ok(reader(row, index)?)
    };
    row.columns().iter().enumerate().map(convert).collect()
}

/// Converts every parameter; the error names the first one that does not convert.
pub fn to_sql_params(params: &[ParameterValue]) -> Result<Vec<SqlParam>> {
    params.iter().map(to_sql_param).collect()
}

/// One parameter as the Rust type whose PostgreSQL type it stands for.
fn to_sql_param(param: &ParameterValue) -> Result<SqlParam> {
    Ok(match param {
        ParameterValue::Int64(v) => Box::new(*v),
        ParameterValue::Str(v) => Box::new(v.clone()),
        ParameterValue::DbNull => Box::new(Null),
        other => {
            return Err(anyhow!(
                "unread-host does not send {} parameters to PostgreSQL; see tools/host/src/postgres/types.rs",
                case_name(other)
            ));
        }
    })
}

/// The bytes a value counts for against the result size limit (Spin's `memory_size`).
pub fn value_size(value: &DbValue) -> usize {
    let payload = match value {
        DbValue::Str(s) | DbValue::Decimal(s) => s.len(),
        DbValue::Binary(b) | DbValue::Jsonb(b) | DbValue::Unsupported(b) => b.len(),
        _ => 0,
    };
    std::mem::size_of::<DbValue>() + payload
}

/// The error type of the driver's conversion traits.
type BoxError = Box<dyn StdError + Sync + Send>;

/// A value as the server sent it (binary format): the text of a `json` value.
struct Raw(Vec<u8>);

impl<'a> FromSql<'a> for Raw {
    fn from_sql(_ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(Raw(raw.to_vec()))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSON
    }
}

/// SQL NULL for a parameter of any type (an `Option::None` would be typed).
#[derive(Debug)]
struct Null;

impl ToSql for Null {
    fn to_sql(&self, _ty: &Type, _out: &mut BytesMut) -> Result<IsNull, BoxError> {
        Ok(IsNull::Yes)
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    fn to_sql_checked(&self, _ty: &Type, _out: &mut BytesMut) -> Result<IsNull, BoxError> {
        Ok(IsNull::Yes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn debug<D: std::fmt::Debug>(value: D) -> String {
        format!("{value:?}")
    }

    fn data_type(ty: Type) -> String {
        debug(column_type(&ty).map(|(t, _)| t))
    }

    /// `param` encoded for a column of type `ty`, or the driver's refusal.
    fn encode(param: ParameterValue, ty: &Type) -> Result<(IsNull, Vec<u8>), BoxError> {
        let sql = to_sql_param(&param).unwrap();
        let mut out = BytesMut::new();
        let is_null = sql.to_sql_checked(ty, &mut out)?;
        Ok((is_null, out.to_vec()))
    }

    #[test]
    fn column_types() {
        let cases = [
            (Type::INT2, DbDataType::Int16),
            (Type::INT4, DbDataType::Int32),
            (Type::INT8, DbDataType::Int64),
            (Type::NUMERIC, DbDataType::Decimal),
            (Type::TEXT, DbDataType::Str),
            (Type::VARCHAR, DbDataType::Str),
            (Type::BPCHAR, DbDataType::Str),
            (Type::BYTEA, DbDataType::Binary),
            (Type::JSONB, DbDataType::Jsonb),
            (Type::JSON, DbDataType::Other("json".into())),
        ];
        for (ty, expected) in cases {
            assert_eq!(data_type(ty.clone()), debug(Some(expected)), "{ty}");
        }
        for ty in [Type::BOOL, Type::FLOAT8, Type::TIMESTAMPTZ, Type::UUID, Type::CHAR, Type::TEXT_ARRAY] {
            assert_eq!(data_type(ty.clone()), "None", "{ty}");
        }
    }

    #[test]
    fn parameters_encode_as_their_postgres_type() {
        assert_eq!(encode(ParameterValue::Int64(i64::MIN), &Type::INT8).unwrap().1, i64::MIN.to_be_bytes());
        assert_eq!(encode(ParameterValue::Str("ü✓".into()), &Type::TEXT).unwrap().1, "ü✓".as_bytes());
        assert!(matches!(encode(ParameterValue::DbNull, &Type::INT4).unwrap().0, IsNull::Yes));
        // The server's type must match: an int64 is no int4, a str no jsonb.
        assert!(encode(ParameterValue::Int64(1), &Type::INT4).is_err());
        assert!(encode(ParameterValue::Str("{}".into()), &Type::JSONB).is_err());
    }

    #[test]
    fn other_parameters_are_refused_by_name() {
        for (param, name) in [
            (ParameterValue::Boolean(true), "boolean"),
            (ParameterValue::Int32(1), "int32"),
            (ParameterValue::Jsonb(b"{}".to_vec()), "jsonb"),
            (ParameterValue::Timestamp(0), "timestamp"),
        ] {
            let Err(error) = to_sql_param(&param) else { panic!("{name} converted") };
            assert!(error.to_string().contains(&format!(" {name} parameters")), "{error}");
        }
    }

    #[test]
    fn value_sizes_count_payloads() {
        let base = std::mem::size_of::<DbValue>();
        assert_eq!(value_size(&DbValue::Int64(1)), base);
        assert_eq!(value_size(&DbValue::Str("abc".into())), base + 3);
        assert_eq!(value_size(&DbValue::Jsonb(vec![0; 10])), base + 10);
    }
}
