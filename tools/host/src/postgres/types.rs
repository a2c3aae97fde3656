//! Conversions between PostgreSQL values and the `spin:postgres@4.2.0` WIT types,
//! following Spin's table.
//!
//! | PostgreSQL                          | WIT `db-data-type` / `db-value`        |
//! |-------------------------------------|----------------------------------------|
//! | `bool`                              | `boolean`                              |
//! | `int2`, `int4`, `int8`              | `int16`, `int32`, `int64`              |
//! | `float4`, `float8`                  | `floating32`, `floating64`             |
//! | `text`, `varchar`, `char(n)`        | `str`                                  |
//! | `bytea`                             | `binary`                               |
//! | `date`, `time`                      | `date`, `time` tuples                  |
//! | `timestamp`, `timestamptz`          | `datetime` tuple (UTC, no zone)        |
//! | `uuid`                              | `uuid` (hyphenated text)               |
//! | `jsonb`                             | `jsonb` (JSON text bytes)              |
//! | `numeric`                           | `decimal` (base-10 text)               |
//! | `int4range`, `int8range`, `numrange`| `range-int32`, `range-int64`, `range-decimal` |
//! | `int4[]`, `int8[]`, `numeric[]`, `text[]`/`varchar[]`/`char(n)[]` | the `array-...` cases |
//! | `interval`                          | `interval`                             |
//! | anything else (`json`, `inet`, ...) | `other(type name)` / `unsupported(raw binary value)` |
//!
//! NULL is `db-null` for every type. As in Spin, a `timestamptz` column cannot
//! be read at all, not even its NULLs (the driver decodes only `timestamp`
//! into the zone-less tuple): the query fails with `query-failed`. Select
//! `ts AT TIME ZONE 'UTC'` instead.
//! Parameters go the other way, each as one specific PostgreSQL type (the
//! server rejects a parameter of another type): `int8` is the one-byte
//! `"char"`, `timestamp(s64)` (seconds since the epoch) is `timestamptz`,
//! `datetime` is `timestamp`, `jsonb` is `jsonb`/`json`, `db-null` fits anything.

use crate::bindings::spin::postgres::postgres::{
    Column, DbDataType, DbValue, Interval as WitInterval, ParameterValue, RangeBoundKind,
};
use anyhow::{Context, Result, anyhow};
use bytes::BytesMut;
use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use postgres_range::{BoundSided, BoundType, Normalizable, Range, RangeBound};
use rust_decimal::Decimal;
use std::error::Error as StdError;
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

/// A statement parameter ready for the driver.
pub type SqlParam = Box<dyn ToSql + Send + Sync>;

/// The error type of the driver's conversion traits.
type BoxError = Box<dyn StdError + Sync + Send>;

/// A WIT range: optional lower and upper bounds with their kinds.
type WitRange<T> = (Option<(T, RangeBoundKind)>, Option<(T, RangeBoundKind)>);

/// The WIT data type of a column of PostgreSQL type `ty`.
pub fn data_type(ty: &Type) -> DbDataType {
    match *ty {
        Type::BOOL => DbDataType::Boolean,
        Type::INT2 => DbDataType::Int16,
        Type::INT4 => DbDataType::Int32,
        Type::INT8 => DbDataType::Int64,
        Type::FLOAT4 => DbDataType::Floating32,
        Type::FLOAT8 => DbDataType::Floating64,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR => DbDataType::Str,
        Type::BYTEA => DbDataType::Binary,
        Type::DATE => DbDataType::Date,
        Type::TIME => DbDataType::Time,
        Type::TIMESTAMP | Type::TIMESTAMPTZ => DbDataType::Datetime,
        Type::UUID => DbDataType::Uuid,
        Type::JSONB => DbDataType::Jsonb,
        Type::NUMERIC => DbDataType::Decimal,
        Type::INT4_RANGE => DbDataType::RangeInt32,
        Type::INT8_RANGE => DbDataType::RangeInt64,
        Type::NUM_RANGE => DbDataType::RangeDecimal,
        Type::INT4_ARRAY => DbDataType::ArrayInt32,
        Type::INT8_ARRAY => DbDataType::ArrayInt64,
        Type::NUMERIC_ARRAY => DbDataType::ArrayDecimal,
        Type::TEXT_ARRAY | Type::VARCHAR_ARRAY | Type::BPCHAR_ARRAY => DbDataType::ArrayStr,
        Type::INTERVAL => DbDataType::Interval,
        _ => DbDataType::Other(ty.name().to_owned()),
    }
}

/// The columns of the result `row` belongs to.
pub fn columns(row: &Row) -> Vec<Column> {
    row.columns()
        .iter()
        .map(|column| Column { name: column.name().to_owned(), data_type: data_type(column.type_()) })
        .collect()
}

/// Converts every value of `row`.
pub fn convert_row(row: &Row) -> Result<Vec<DbValue>> {
    (0..row.len()).map(|index| convert_value(row, index)).collect()
}

/// Reads column `index` of `row` as `V` and wraps it with `wrap`; NULL is `db-null`.
fn read<'a, V: FromSql<'a>>(row: &'a Row, index: usize, wrap: impl FnOnce(V) -> Result<DbValue>) -> Result<DbValue> {
    match row.try_get::<_, Option<V>>(index)? {
        Some(value) => wrap(value),
        None => Ok(DbValue::DbNull),
    }
}

/// Converts the value in column `index` of `row` according to the column's type.
fn convert_value(row: &Row, index: usize) -> Result<DbValue> {
    let ty = row.columns()[index].type_();
    match *ty {
        Type::BOOL => read(row, index, |v| Ok(DbValue::Boolean(v))),
        Type::INT2 => read(row, index, |v| Ok(DbValue::Int16(v))),
        Type::INT4 => read(row, index, |v| Ok(DbValue::Int32(v))),
        Type::INT8 => read(row, index, |v| Ok(DbValue::Int64(v))),
        Type::FLOAT4 => read(row, index, |v| Ok(DbValue::Floating32(v))),
        Type::FLOAT8 => read(row, index, |v| Ok(DbValue::Floating64(v))),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR => read(row, index, |v| Ok(DbValue::Str(v))),
        Type::BYTEA => read(row, index, |v| Ok(DbValue::Binary(v))),
        Type::DATE => read(row, index, |v| Ok(DbValue::Date(date_to_wit(v)))),
        Type::TIME => read(row, index, |v| Ok(DbValue::Time(time_to_wit(v)))),
        // `NaiveDateTime` decodes `timestamp` only: `timestamptz` fails, as in Spin.
        Type::TIMESTAMP | Type::TIMESTAMPTZ => read(row, index, |v| Ok(DbValue::Datetime(datetime_to_wit(v)))),
        Type::UUID => read(row, index, |v: uuid::Uuid| Ok(DbValue::Uuid(v.to_string()))),
        Type::JSONB => read(row, index, |v: serde_json::Value| {
            Ok(DbValue::Jsonb(serde_json::to_vec(&v).context("invalid JSON from database")?))
        }),
        Type::NUMERIC => read(row, index, |v: Decimal| Ok(DbValue::Decimal(v.to_string()))),
        Type::INT4_RANGE => read(row, index, |v: Range<i32>| Ok(DbValue::RangeInt32(range_to_wit(&v, |n| *n)))),
        Type::INT8_RANGE => read(row, index, |v: Range<i64>| Ok(DbValue::RangeInt64(range_to_wit(&v, |n| *n)))),
        Type::NUM_RANGE => {
            read(row, index, |v: Range<RangeDecimal>| Ok(DbValue::RangeDecimal(range_to_wit(&v, |d| d.0.to_string()))))
        }
        Type::INT4_ARRAY => read(row, index, |v| Ok(DbValue::ArrayInt32(v))),
        Type::INT8_ARRAY => read(row, index, |v| Ok(DbValue::ArrayInt64(v))),
        Type::NUMERIC_ARRAY => read(row, index, |v: Vec<Option<Decimal>>| {
            Ok(DbValue::ArrayDecimal(v.iter().map(|d| d.map(|d| d.to_string())).collect()))
        }),
        Type::TEXT_ARRAY | Type::VARCHAR_ARRAY | Type::BPCHAR_ARRAY => read(row, index, |v| Ok(DbValue::ArrayStr(v))),
        Type::INTERVAL => read(row, index, |v: Interval| Ok(DbValue::Interval(v.0))),
        _ => read(row, index, |v: RawValue| Ok(DbValue::Unsupported(v.0))),
    }
}

/// Converts every parameter; the error names the first one that does not convert.
pub fn to_sql_params(params: &[ParameterValue]) -> Result<Vec<SqlParam>> {
    params.iter().map(to_sql_param).collect()
}

/// One parameter as the Rust type whose PostgreSQL type it stands for.
fn to_sql_param(param: &ParameterValue) -> Result<SqlParam> {
    Ok(match param {
        ParameterValue::Boolean(v) => Box::new(*v),
        ParameterValue::Int8(v) => Box::new(*v),
        ParameterValue::Int16(v) => Box::new(*v),
        ParameterValue::Int32(v) => Box::new(*v),
        ParameterValue::Int64(v) => Box::new(*v),
        ParameterValue::Floating32(v) => Box::new(*v),
        ParameterValue::Floating64(v) => Box::new(*v),
        ParameterValue::Str(v) => Box::new(v.clone()),
        ParameterValue::Binary(v) => Box::new(v.clone()),
        ParameterValue::Date(v) => Box::new(date_from_wit(*v)?),
        ParameterValue::Time(v) => Box::new(time_from_wit(*v)?),
        ParameterValue::Datetime(v) => Box::new(datetime_from_wit(*v)?),
        ParameterValue::Timestamp(v) => Box::new(timestamp_from_wit(*v)?),
        ParameterValue::Uuid(v) => Box::new(uuid::Uuid::parse_str(v).with_context(|| format!("invalid UUID {v}"))?),
        ParameterValue::Jsonb(v) => Box::new(json_from_wit(v)?),
        ParameterValue::Decimal(v) => Box::new(decimal_from_wit(v)?),
        ParameterValue::RangeInt32(v) => Box::new(range_from_wit(v, |n| Ok(*n))?),
        ParameterValue::RangeInt64(v) => Box::new(range_from_wit(v, |n| Ok(*n))?),
        ParameterValue::RangeDecimal(v) => Box::new(range_from_wit(v, |d| decimal_from_wit(d).map(RangeDecimal))?),
        ParameterValue::ArrayInt32(v) => Box::new(v.clone()),
        ParameterValue::ArrayInt64(v) => Box::new(v.clone()),
        ParameterValue::ArrayDecimal(v) => {
            Box::new(v.iter().map(|d| d.as_deref().map(decimal_from_wit).transpose()).collect::<Result<Vec<_>>>()?)
        }
        ParameterValue::ArrayStr(v) => Box::new(v.clone()),
        ParameterValue::Interval(v) => Box::new(Interval(*v)),
        ParameterValue::DbNull => Box::new(Null),
    })
}

/// The bytes a value counts for against the result size limit.
pub fn value_size(value: &DbValue) -> usize {
    let strings = |items: &[Option<String>]| -> usize {
        items.iter().map(|s| std::mem::size_of::<Option<String>>() + s.as_ref().map_or(0, String::len)).sum()
    };
    let payload = match value {
        DbValue::Str(s) | DbValue::Uuid(s) | DbValue::Decimal(s) => s.len(),
        DbValue::Binary(b) | DbValue::Jsonb(b) | DbValue::Unsupported(b) => b.len(),
        DbValue::ArrayInt32(v) => v.len() * std::mem::size_of::<Option<i32>>(),
        DbValue::ArrayInt64(v) => v.len() * std::mem::size_of::<Option<i64>>(),
        DbValue::ArrayDecimal(v) | DbValue::ArrayStr(v) => strings(v),
        _ => 0,
    };
    std::mem::size_of::<DbValue>() + payload
}

fn date_to_wit(date: NaiveDate) -> (i32, u8, u8) {
    // Month and day always fit in a u8.
    (date.year(), date.month() as u8, date.day() as u8)
}

fn time_to_wit(time: NaiveTime) -> (u8, u8, u8, u32) {
    (time.hour() as u8, time.minute() as u8, time.second() as u8, time.nanosecond())
}

fn datetime_to_wit(value: NaiveDateTime) -> (i32, u8, u8, u8, u8, u8, u32) {
    let (y, mo, d) = date_to_wit(value.date());
    let (h, mi, s, ns) = time_to_wit(value.time());
    (y, mo, d, h, mi, s, ns)
}

fn date_from_wit((y, m, d): (i32, u8, u8)) -> Result<NaiveDate> {
    NaiveDate::from_ymd_opt(y, m.into(), d.into()).ok_or_else(|| anyhow!("invalid date y={y}, m={m}, d={d}"))
}

fn time_from_wit((h, m, s, ns): (u8, u8, u8, u32)) -> Result<NaiveTime> {
    NaiveTime::from_hms_nano_opt(h.into(), m.into(), s.into(), ns)
        .ok_or_else(|| anyhow!("invalid time {h}:{m}:{s}:{ns}"))
}

fn datetime_from_wit((y, mo, d, h, mi, s, ns): (i32, u8, u8, u8, u8, u8, u32)) -> Result<NaiveDateTime> {
    Ok(NaiveDateTime::new(date_from_wit((y, mo, d))?, time_from_wit((h, mi, s, ns))?))
}

/// Seconds since the Unix epoch as an instant (a `timestamptz` parameter).
fn timestamp_from_wit(seconds: i64) -> Result<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp(seconds, 0).ok_or_else(|| anyhow!("invalid epoch timestamp {seconds}"))
}

fn json_from_wit(bytes: &[u8]) -> Result<serde_json::Value> {
    serde_json::from_slice(bytes).with_context(|| format!("invalid JSON {}", String::from_utf8_lossy(bytes)))
}

fn decimal_from_wit(text: &str) -> Result<Decimal> {
    Decimal::from_str_exact(text).with_context(|| format!("invalid decimal {text}"))
}

fn bound_kind_to_wit(kind: BoundType) -> RangeBoundKind {
    match kind {
        BoundType::Inclusive => RangeBoundKind::Inclusive,
        BoundType::Exclusive => RangeBoundKind::Exclusive,
    }
}

fn bound_kind_from_wit(kind: RangeBoundKind) -> BoundType {
    match kind {
        RangeBoundKind::Inclusive => BoundType::Inclusive,
        RangeBoundKind::Exclusive => BoundType::Exclusive,
    }
}

/// A range's bounds, each mapped with `map`; an empty range has neither.
fn range_to_wit<T, W>(range: &Range<T>, map: impl Fn(&T) -> W) -> WitRange<W>
where
    T: PartialOrd + Normalizable,
{
    fn bound<S: BoundSided, T, W>(b: &RangeBound<S, T>, map: &impl Fn(&T) -> W) -> (W, RangeBoundKind) {
        (map(&b.value), bound_kind_to_wit(b.type_))
    }
    (range.lower().map(|b| bound(b, &map)), range.upper().map(|b| bound(b, &map)))
}

/// A driver range from WIT bounds, each mapped with `map`.
fn range_from_wit<W, T>(range: &WitRange<W>, map: impl Fn(&W) -> Result<T>) -> Result<Range<T>>
where
    T: PartialOrd + Normalizable,
{
    fn bound<S: BoundSided, W, T: PartialOrd>(
        (value, kind): &(W, RangeBoundKind),
        map: &impl Fn(&W) -> Result<T>,
    ) -> Result<RangeBound<S, T>> {
        Ok(RangeBound::new(map(value)?, bound_kind_from_wit(*kind)))
    }
    let (lower, upper) = range;
    let lower = lower.as_ref().map(|b| bound(b, &map)).transpose()?;
    let upper = upper.as_ref().map(|b| bound(b, &map)).transpose()?;
    Ok(Range::new(lower, upper))
}

/// A `numeric` usable as a range bound (ranges need `Normalizable`; continuous
/// values are left as they are).
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
struct RangeDecimal(Decimal);

impl Normalizable for RangeDecimal {
    fn normalize<S: BoundSided>(bound: RangeBound<S, Self>) -> RangeBound<S, Self> {
        bound
    }
}

impl<'a> FromSql<'a> for RangeDecimal {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Decimal::from_sql(ty, raw).map(RangeDecimal)
    }

    fn accepts(ty: &Type) -> bool {
        <Decimal as FromSql>::accepts(ty)
    }
}

impl ToSql for RangeDecimal {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        self.0.to_sql(ty, out)
    }

    fn accepts(ty: &Type) -> bool {
        <Decimal as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}

/// An `interval` in its binary form: microseconds, days, months (big-endian i64, i32, i32).
#[derive(Debug)]
struct Interval(WitInterval);

impl<'a> FromSql<'a> for Interval {
    fn from_sql(_ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        let bytes: [u8; 16] = raw.try_into().map_err(|_| "unexpected binary format for Postgres INTERVAL")?;
        let (micros, rest) = bytes.split_at(8);
        let (days, months) = rest.split_at(4);
        Ok(Interval(WitInterval {
            micros: i64::from_be_bytes(micros.try_into()?),
            days: i32::from_be_bytes(days.try_into()?),
            months: i32::from_be_bytes(months.try_into()?),
        }))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::INTERVAL
    }
}

impl ToSql for Interval {
    fn to_sql(&self, _ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
        out.extend_from_slice(&self.0.micros.to_be_bytes());
        out.extend_from_slice(&self.0.days.to_be_bytes());
        out.extend_from_slice(&self.0.months.to_be_bytes());
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::INTERVAL
    }

    to_sql_checked!();
}

/// A value of a type the WIT has no case for: its raw binary form.
struct RawValue(Vec<u8>);

impl<'a> FromSql<'a> for RawValue {
    fn from_sql(_ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(RawValue(raw.to_vec()))
    }

    fn accepts(_ty: &Type) -> bool {
        true
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
            (Type::BOOL, DbDataType::Boolean),
            (Type::INT2, DbDataType::Int16),
            (Type::INT4, DbDataType::Int32),
            (Type::INT8, DbDataType::Int64),
            (Type::FLOAT4, DbDataType::Floating32),
            (Type::FLOAT8, DbDataType::Floating64),
            (Type::TEXT, DbDataType::Str),
            (Type::VARCHAR, DbDataType::Str),
            (Type::BPCHAR, DbDataType::Str),
            (Type::BYTEA, DbDataType::Binary),
            (Type::TIMESTAMP, DbDataType::Datetime),
            (Type::TIMESTAMPTZ, DbDataType::Datetime),
            (Type::DATE, DbDataType::Date),
            (Type::TIME, DbDataType::Time),
            (Type::UUID, DbDataType::Uuid),
            (Type::JSONB, DbDataType::Jsonb),
            (Type::NUMERIC, DbDataType::Decimal),
            (Type::INT8_RANGE, DbDataType::RangeInt64),
            (Type::TEXT_ARRAY, DbDataType::ArrayStr),
            (Type::INTERVAL, DbDataType::Interval),
            (Type::JSON, DbDataType::Other("json".into())),
            (Type::INET, DbDataType::Other("inet".into())),
            (Type::CHAR, DbDataType::Other("char".into())),
        ];
        for (ty, expected) in cases {
            assert_eq!(debug(data_type(&ty)), debug(expected), "{ty}");
        }
    }

    #[test]
    fn parameters_encode_as_their_postgres_type() {
        assert_eq!(encode(ParameterValue::Int64(i64::MIN), &Type::INT8).unwrap().1, i64::MIN.to_be_bytes());
        assert_eq!(encode(ParameterValue::Int16(-2), &Type::INT2).unwrap().1, (-2i16).to_be_bytes());
        assert_eq!(encode(ParameterValue::Int8(7), &Type::CHAR).unwrap().1, [7]);
        assert_eq!(encode(ParameterValue::Boolean(true), &Type::BOOL).unwrap().1, [1]);
        assert_eq!(encode(ParameterValue::Str("ü✓".into()), &Type::TEXT).unwrap().1, "ü✓".as_bytes());
        assert_eq!(encode(ParameterValue::Binary(vec![0, 9]), &Type::BYTEA).unwrap().1, [0, 9]);
        let (_, jsonb) = encode(ParameterValue::Jsonb(br#"{"a": [1, null]}"#.to_vec()), &Type::JSONB).unwrap();
        assert_eq!(jsonb, b"\x01{\"a\":[1,null]}");
        assert!(matches!(encode(ParameterValue::DbNull, &Type::INT4).unwrap().0, IsNull::Yes));
    }

    #[test]
    fn parameters_of_another_type_are_refused_by_the_driver() {
        assert!(encode(ParameterValue::Int32(1), &Type::INT8).is_err());
        assert!(encode(ParameterValue::Int8(1), &Type::INT2).is_err());
        assert!(encode(ParameterValue::Str("{}".into()), &Type::JSONB).is_err());
        assert!(encode(ParameterValue::Timestamp(0), &Type::TIMESTAMP).is_err());
        assert!(encode(ParameterValue::Timestamp(0), &Type::TIMESTAMPTZ).is_ok());
        assert!(encode(ParameterValue::Datetime((2024, 2, 29, 1, 2, 3, 0)), &Type::TIMESTAMP).is_ok());
    }

    #[test]
    fn invalid_parameters_fail_conversion() {
        for param in [
            ParameterValue::Jsonb(b"{not json".to_vec()),
            ParameterValue::Uuid("nope".into()),
            ParameterValue::Decimal("1.2.3".into()),
            ParameterValue::Date((2023, 2, 29)),
            ParameterValue::Time((24, 0, 0, 0)),
            ParameterValue::Timestamp(i64::MAX),
            ParameterValue::ArrayDecimal(vec![Some("x".into())]),
        ] {
            let text = debug(&param);
            assert!(to_sql_param(&param).is_err(), "{text}");
        }
    }

    #[test]
    fn date_and_time_tuples() {
        let at = NaiveDate::from_ymd_opt(1999, 12, 31).unwrap().and_hms_nano_opt(23, 59, 58, 123_456_000).unwrap();
        assert_eq!(datetime_to_wit(at), (1999, 12, 31, 23, 59, 58, 123_456_000));
        assert_eq!(datetime_from_wit(datetime_to_wit(at)).unwrap(), at);
        assert_eq!(
            timestamp_from_wit(86_400).unwrap().naive_utc().date(),
            NaiveDate::from_ymd_opt(1970, 1, 2).unwrap()
        );
    }

    #[test]
    fn intervals_round_trip_through_the_binary_form() {
        let wit = WitInterval { micros: -1_500_000, days: 3, months: 14 };
        let mut out = BytesMut::new();
        Interval(wit).to_sql(&Type::INTERVAL, &mut out).unwrap();
        let Interval(back) = Interval::from_sql(&Type::INTERVAL, &out).unwrap();
        assert_eq!((back.micros, back.days, back.months), (-1_500_000, 3, 14));
        assert!(Interval::from_sql(&Type::INTERVAL, &[0; 15]).is_err());
    }

    #[test]
    fn ranges_keep_bounds_and_kinds() {
        let wit = (Some((1, RangeBoundKind::Inclusive)), Some((10, RangeBoundKind::Inclusive)));
        let range = range_from_wit(&wit, |n: &i32| Ok(*n)).unwrap();
        // Discrete ranges are normalized to [lower, upper).
        let back = range_to_wit(&range, |n| *n);
        assert_eq!(debug(back), debug((Some((1, RangeBoundKind::Inclusive)), Some((11, RangeBoundKind::Exclusive)))));
        let decimals = (None, Some(("2.50".to_owned(), RangeBoundKind::Exclusive)));
        let range = range_from_wit(&decimals, |d| decimal_from_wit(d).map(RangeDecimal)).unwrap();
        assert_eq!(debug(range_to_wit(&range, |d| d.0.to_string())), debug(decimals));
    }

    #[test]
    fn value_sizes_count_payloads() {
        let base = std::mem::size_of::<DbValue>();
        assert_eq!(value_size(&DbValue::Int64(1)), base);
        assert_eq!(value_size(&DbValue::Str("abc".into())), base + 3);
        assert_eq!(value_size(&DbValue::Jsonb(vec![0; 10])), base + 10);
    }
}
