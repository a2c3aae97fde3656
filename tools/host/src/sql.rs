//! Plumbing shared by the SQL hosts (`spin:mysql`, `spin:postgres`): turning
//! a query into the WIT's `tuple<list<column>, stream<row>, future<result<_, error>>>`,
//! and the result size limit.
//!
//! A query runs as a tokio task that first reports the columns, then sends
//! rows through a small channel. The guest reads the rows from a
//! `stream<row>` whose host end ([`RowProducer`]) drains that channel, and the
//! task's outcome from a `future<result>`. The channel is bounded, so a slow
//! reader holds the database back instead of rows piling up in memory; if the
//! guest drops the stream, the task notices when it next sends (or waits).

use crate::error::HostError;
use futures_util::FutureExt;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::{mpsc, oneshot};
use wasmtime::StoreContextMut;
use wasmtime::component::{
    Accessor, Destination, FutureReader, HasData, Lift, Lower, StreamProducer, StreamReader, StreamResult, VecBuffer,
};

/// The most a query may return, as counted by each host: Spin's
/// `MAX_HOST_BUFFERED_BYTES` (128 MiB).
pub const MAX_RESULT_BYTES: usize = 128 << 20;

/// Rows a query task may run ahead of the guest.
const ROW_BUFFER: usize = 4;

/// The text of the error for a result over [`MAX_RESULT_BYTES`].
pub fn too_large_message() -> String {
    format!("query result exceeds limit of {MAX_RESULT_BYTES} bytes")
}

/// The WIT name of `value`'s case, for messages: `ParameterValue::Floating64(1.5)`
/// is `floating64`, `ParameterValue::DbNull` is `db-null`.
pub fn case_name(value: &impl std::fmt::Debug) -> String {
    /// Keeps what bindgen's `Debug` writes before the payload: `Type::Case`.
    struct UpToPayload(String);
    impl std::fmt::Write for UpToPayload {
        fn write_str(&mut self, text: &str) -> std::fmt::Result {
            let end = text.find('(');
            self.0.push_str(&text[..end.unwrap_or(text.len())]);
            if end.is_some() { Err(std::fmt::Error) } else { Ok(()) }
        }
    }
    let mut debug = UpToPayload(String::new());
    let _ = std::fmt::write(&mut debug, format_args!("{value:?}"));
    let case = debug.0.rsplit("::").next().unwrap_or_default();
    let mut name = String::new();
    for (i, c) in case.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('-');
        }
        name.push(c.to_ascii_lowercase());
    }
    name
}

/// A WIT error type the plumbing can make `other(...)` errors of.
pub trait OtherError {
    /// The error's `other(message)` case.
    fn other(message: String) -> Self;
}

/// What a query returns to the guest: columns, the row stream and the outcome future.
pub type QueryParts<C, R, E> = (C, StreamReader<R>, FutureReader<Result<(), E>>);

/// The sending end a query task writes rows to.
pub struct RowSender<R> {
    rows: mpsc::Sender<R>,
}

/// A row channel for tests that drive a query task without a guest.
#[cfg(test)]
pub fn test_channel<R>(capacity: usize) -> (RowSender<R>, mpsc::Receiver<R>) {
    let (rows, receiver) = mpsc::channel(capacity);
    (RowSender { rows }, receiver)
}

/// The guest dropped its end of the row stream.
#[derive(Debug)]
pub struct StreamClosed;

impl std::fmt::Display for StreamClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("channel closed")
    }
}

impl<R> RowSender<R> {
    /// Sends one row, waiting while the guest is behind.
    pub async fn send(&self, row: R) -> Result<(), StreamClosed> {
        self.rows.send(row).await.map_err(|_| StreamClosed)
    }

    /// Completes once the guest has dropped the row stream.
    pub async fn closed(&self) {
        self.rows.closed().await
    }
}

/// Runs `task` in the background and returns its columns, row stream and outcome future.
///
/// The task gets a one-shot sender for the columns and a [`RowSender`]. If it
/// fails before sending the columns, its error is the result of the call
/// itself; if it ends successfully without sending them, the columns are
/// `C::default()` (and the stream is empty). Errors after the columns reach
/// the guest through the future.
pub async fn stream_query<T, H, C, R, E, F, Fut>(
    accessor: &Accessor<T, H>,
    task: F,
) -> Result<QueryParts<C, R, E>, HostError<E>>
where
    H: HasData,
    C: Default + Send + 'static,
    R: Lower + Lift + Send + Sync + 'static,
    E: OtherError + Lower + Lift + Send + Sync + 'static,
    F: FnOnce(oneshot::Sender<C>, RowSender<R>) -> Fut,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
{
    let (columns_tx, columns_rx) = oneshot::channel();
    let (rows_tx, rows_rx) = mpsc::channel(ROW_BUFFER);
    let (outcome_tx, outcome_rx) = oneshot::channel();
    let work = task(columns_tx, RowSender { rows: rows_tx });
    tokio::spawn(work.map(move |outcome| {
        let _ = outcome_tx.send(outcome);
    }));
    let (columns, outcome) = match columns_rx.await {
        Ok(columns) => (columns, Outcome::Pending(outcome_rx)),
        Err(_) => match finished(outcome_rx).await {
            Ok(()) => (C::default(), Outcome::Done),
            Err(e) => return Err(HostError::Guest(e)),
        },
    };
    let (rows, outcome) = accessor.with(|mut access| {
        let rows = StreamReader::new(&mut access, RowProducer { rows: rows_rx })?;
        let outcome = FutureReader::new(&mut access, outcome.into_future())?;
        Ok::<_, wasmtime::Error>((rows, outcome))
    })?;
    Ok((columns, rows, outcome))
}

/// The outcome of a query task that was still running, or had ended well, when the call returned.
enum Outcome<E> {
    Pending(oneshot::Receiver<Result<(), E>>),
    Done,
}

impl<E: OtherError + Send + 'static> Outcome<E> {
    /// The value of the guest's `future<result<_, error>>`.
    async fn into_future(self) -> wasmtime::Result<Result<(), E>> {
        Ok(match self {
            Outcome::Pending(outcome) => finished(outcome).await,
            Outcome::Done => Ok(()),
        })
    }
}

/// The result of a query task; a task that panicked is an `other` error.
async fn finished<E: OtherError>(outcome: oneshot::Receiver<Result<(), E>>) -> Result<(), E> {
    outcome.await.unwrap_or_else(|_| Err(E::other("the query task ended unexpectedly".to_owned())))
}

/// The host end of a `stream<row>`: delivers the rows a query task sends.
pub struct RowProducer<R> {
    rows: mpsc::Receiver<R>,
}

impl<D, R: Send + Sync + 'static> StreamProducer<D> for RowProducer<R> {
    type Item = R;
    type Buffer = VecBuffer<R>;

    fn poll_produce<'a>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut store: StoreContextMut<'a, D>,
        mut destination: Destination<'a, R, VecBuffer<R>>,
        finish: bool,
    ) -> Poll<wasmtime::Result<StreamResult>> {
        let capacity = destination.remaining(&mut store);
        // A zero-length read only asks for readiness; say "ready" and let the
        // next real read wait if need be.
        if capacity == Some(0) {
            return Poll::Ready(Ok(StreamResult::Completed));
        }
        let rows = &mut self.get_mut().rows;
        match rows.poll_recv(cx) {
            Poll::Ready(Some(first)) => {
                destination.set_buffer(take_ready(rows, first, capacity).into());
                Poll::Ready(Ok(StreamResult::Completed))
            }
            Poll::Ready(None) => Poll::Ready(Ok(StreamResult::Dropped)),
            Poll::Pending if finish => Poll::Ready(Ok(StreamResult::Cancelled)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// `first` plus the rows already waiting, up to `capacity` (unbounded if `None`).
fn take_ready<R>(rows: &mut mpsc::Receiver<R>, first: R, capacity: Option<usize>) -> Vec<R> {
    let capacity = capacity.unwrap_or(usize::MAX);
    let mut batch = vec![first];
    while batch.len() < capacity {
        match rows.try_recv() {
            Ok(row) => batch.push(row),
            Err(_) => break,
        }
    }
    batch
}

/// Counts result bytes against [`MAX_RESULT_BYTES`].
#[derive(Debug, Default)]
pub struct ByteBudget {
    used: usize,
}

impl ByteBudget {
    /// Adds `bytes`; fails with Spin's message once the total is over the limit.
    pub fn charge(&mut self, bytes: usize) -> Result<(), String> {
        self.used = self.used.saturating_add(bytes);
        if self.used > MAX_RESULT_BYTES {
            return Err(too_large_message());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_rows_are_batched_up_to_capacity() {
        let (tx, mut rx) = mpsc::channel(8);
        for n in 1..=5 {
            tx.try_send(n).unwrap();
        }
        let first = rx.try_recv().unwrap();
        assert_eq!(take_ready(&mut rx, first, Some(3)), [1, 2, 3]);
        let first = rx.try_recv().unwrap();
        assert_eq!(take_ready(&mut rx, first, None), [4, 5]);
    }

    #[test]
    fn case_names_are_the_wit_names() {
        use crate::bindings::spin::postgres::postgres::ParameterValue;
        assert_eq!(case_name(&ParameterValue::Floating64(1.5)), "floating64");
        assert_eq!(case_name(&ParameterValue::DbNull), "db-null");
        assert_eq!(case_name(&ParameterValue::RangeInt32((None, None))), "range-int32");
        assert_eq!(case_name(&ParameterValue::Binary(vec![0; 1 << 20])), "binary");
    }

    #[test]
    fn budget_fails_over_the_limit() {
        let mut budget = ByteBudget::default();
        assert!(budget.charge(MAX_RESULT_BYTES).is_ok());
        let err = budget.charge(1).unwrap_err();
        assert_eq!(err, "query result exceeds limit of 134217728 bytes");
    }
}
