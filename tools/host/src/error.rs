//! The error type of the Spin host functions.
//!
//! The bindings map every Spin WIT `error` type `E` to [`HostError<E>`] with
//! bindgen's `trappable_error_type`, as Spin 4.1's `crates/world` does (Spin
//! maps each to `E` itself, so its host functions never trap this way). A host
//! function returns `Result<T, HostError<E>>` and uses `?` on both the errors
//! the guest receives and the ones that trap; the generated `convert_error`
//! of each interface ([`HostError::into_guest`]) tells them apart.

use crate::bindings::spin::{mysql::mysql, postgres::postgres, redis::redis, variables::variables};
use wasmtime::component::ResourceTableError;

/// What a host function with a `result<_, E>` WIT result can fail with.
#[derive(Debug)]
pub enum HostError<E> {
    /// The guest receives `E` as the result's error.
    Guest(E),
    /// The guest traps (a host failure, such as a resource table error).
    Trap(wasmtime::Error),
}

impl<E> HostError<E> {
    /// The error to return to the guest, or the trap.
    pub fn into_guest(self) -> wasmtime::Result<E> {
        match self {
            HostError::Guest(error) => Ok(error),
            HostError::Trap(trap) => Err(trap),
        }
    }
}

impl<E> From<wasmtime::Error> for HostError<E> {
    fn from(trap: wasmtime::Error) -> HostError<E> {
        HostError::Trap(trap)
    }
}

impl<E> From<ResourceTableError> for HostError<E> {
    fn from(error: ResourceTableError) -> HostError<E> {
        HostError::Trap(error.into())
    }
}

/// `impl From<E> for HostError<E>` for each WIT error type (a blanket impl
/// would overlap with the `From<wasmtime::Error>` one).
macro_rules! guest_errors {
    ($($error:ty),* $(,)?) => {
        $(impl From<$error> for HostError<$error> {
            fn from(error: $error) -> HostError<$error> {
                HostError::Guest(error)
            }
        })*
    };
}

guest_errors!(redis::Error, mysql::Error, postgres::Error, variables::Error);
