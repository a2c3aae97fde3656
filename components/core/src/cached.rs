//! One connection per instance, kept across the requests Spin sends it.
//!
//! Opening a connection is a new TCP connection and costs most of a request;
//! Spin reuses an instance for many requests, so the connection is cached in
//! it. It holds no per-user data. A cached connection that failed is dropped
//! and reopened once within the request; every operation we send is
//! idempotent, so the retry is safe. A call that outlives its deadline is
//! given up ([`within`]); the caller then drops the connection.

use std::cell::RefCell;
use std::future::{Future, poll_fn};
use std::pin::pin;
use std::rc::Rc;
use std::task::Poll;
use std::thread::LocalKey;
use std::time::Duration;

/// A per-instance slot for one connection.
pub type Slot<C> = RefCell<Option<Rc<C>>>;

/// Runs `operation` on the cached connection (opening one with `open` if
/// there is none); if it fails on a cached connection, reopens once and
/// retries. A request thus opens at most one connection.
pub async fn with_connection<C, T, E, Op, OpFut, Open, OpenFut>(
    slot: &'static LocalKey<Slot<C>>,
    open: Open,
    operation: Op,
) -> Result<T, E>
where
    Open: Fn() -> OpenFut,
    OpenFut: Future<Output = Result<C, E>>,
    Op: Fn(Rc<C>) -> OpFut,
    OpFut: Future<Output = Result<T, E>>,
{
    let cached = slot.with_borrow(|c| c.clone());
    let was_cached = cached.is_some();
    let connection = match cached {
        Some(connection) => connection,
        None => reopen(slot, &open).await?,
    };
    match operation(connection.clone()).await {
        Ok(value) => Ok(value),
        Err(error) => {
            forget(slot, &connection);
            if !was_cached {
                return Err(error);
            }
            let fresh = reopen(slot, &open).await?;
            let result = operation(fresh.clone()).await;
            if result.is_err() {
                forget(slot, &fresh);
            }
            result
        }
    }
}

async fn reopen<C, E, Open, OpenFut>(slot: &'static LocalKey<Slot<C>>, open: &Open) -> Result<Rc<C>, E>
where
    Open: Fn() -> OpenFut,
    OpenFut: Future<Output = Result<C, E>>,
{
    let connection = Rc::new(open().await?);
    slot.with_borrow_mut(|c| *c = Some(connection.clone()));
    Ok(connection)
}

/// Drops the cached connection if it is still the one that failed.
fn forget<C>(slot: &'static LocalKey<Slot<C>>, failed: &Rc<C>) {
    slot.with_borrow_mut(|c| {
        if c.as_ref().is_some_and(|current| Rc::ptr_eq(current, failed)) {
            *c = None;
        }
    });
}

/// The call's result, or None if `deadline` passed first: the call is
/// dropped, and so is the cached connection (what it holds now is unknown;
/// the next call opens another).
pub async fn within<C, T>(
    slot: &'static LocalKey<Slot<C>>,
    deadline: Duration,
    call: impl Future<Output = T>,
) -> Option<T> {
    let result = timed(deadline, call).await;
    if result.is_none() {
        slot.with_borrow_mut(|c| *c = None);
    }
    result
}

/// `call`'s result, or None if `deadline` passes first (the call is
/// dropped).
pub async fn timed<T>(deadline: Duration, call: impl Future<Output = T>) -> Option<T> {
    let (mut call, mut timer) = (pin!(call), pin!(spin_sdk::time::sleep(deadline)));
    poll_fn(|cx| match call.as_mut().poll(cx) {
        Poll::Ready(value) => Poll::Ready(Some(value)),
        Poll::Pending => timer.as_mut().poll(cx).map(|()| None),
    })
    .await
}
