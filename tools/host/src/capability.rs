//! Plumbing shared by the outbound capability hosts (`spin:redis`, `spin:mysql`,
//! `spin:postgres`): the view of the store their functions get, and access to
//! the resources (connections) they keep in the store's resource table.

use crate::error::HostError;
use std::marker::PhantomData;
use wasmtime::component::{Accessor, HasData, Resource, ResourceTable};

/// What one capability's host functions see of a store: the resource table
/// and the capability's per-component settings `C`.
pub struct CapabilityView<'a, C> {
    /// Where the capability's resources live.
    pub table: &'a mut ResourceTable,
    /// The component's settings for this capability.
    pub ctx: &'a C,
}

/// [`HasData`] marker of the host of the capability whose settings are `C`;
/// the generated `...WithStore` traits are implemented on it.
pub struct CapabilityHost<C>(PhantomData<fn() -> C>);

impl<C: 'static> HasData for CapabilityHost<C> {
    type Data<'a> = CapabilityView<'a, C>;
}

impl<C> CapabilityView<'_, C> {
    /// Applies `read` to the value behind `resource`; `None` if the table has no such resource.
    pub fn read<R: 'static, O>(&mut self, resource: &Resource<R>, read: impl FnOnce(&R) -> O) -> Option<O> {
        self.table.get(resource).ok().map(read)
    }

    /// Moves `value` into the table as a new resource owned by the guest.
    pub fn push<R: Send + 'static>(&mut self, value: R) -> wasmtime::Result<Resource<R>> {
        Ok(self.table.push(value)?)
    }

    /// Removes `resource` from the table: the resource's `drop`.
    pub fn delete<R: 'static>(&mut self, resource: Resource<R>) -> wasmtime::Result<()> {
        self.table.delete(resource)?;
        Ok(())
    }
}

/// The [`CapabilityView`] operations for `async` functions, which reach the
/// store through an [`Accessor`] between their `await`s.
impl<C: Clone + 'static> CapabilityHost<C> {
    /// A copy of the component's settings, to use across `await`s.
    pub fn settings<T>(accessor: &Accessor<T, Self>) -> C {
        accessor.with(|mut access| access.get().ctx.clone())
    }

    /// Opens a resource (a connection) with `open`, given the settings, and
    /// hands it to the guest; `open`'s error goes to the guest as is (or traps,
    /// if it is a [`HostError::Trap`]).
    pub async fn open_resource<T, R, E, X, F, Fut>(
        accessor: &Accessor<T, Self>,
        open: F,
    ) -> Result<Resource<R>, HostError<E>>
    where
        R: Send + 'static,
        F: FnOnce(C) -> Fut,
        Fut: Future<Output = Result<R, X>>,
        X: Into<HostError<E>>,
    {
        let value = open(Self::settings(accessor)).await.map_err(Into::into)?;
        Ok(Self::push(accessor, value)?)
    }

    /// See [`CapabilityView::read`].
    pub fn read<T, R: 'static, O>(
        accessor: &Accessor<T, Self>,
        resource: &Resource<R>,
        read: impl FnOnce(&R) -> O,
    ) -> Option<O> {
        accessor.with(|mut access| access.get().read(resource, read))
    }

    /// See [`CapabilityView::push`].
    pub fn push<T, R: Send + 'static>(accessor: &Accessor<T, Self>, value: R) -> wasmtime::Result<Resource<R>> {
        accessor.with(|mut access| access.get().push(value))
    }

    /// See [`CapabilityView::delete`].
    pub fn delete<T, R: 'static>(accessor: &Accessor<T, Self>, resource: Resource<R>) -> wasmtime::Result<()> {
        accessor.with(|mut access| access.get().delete(resource))
    }
}
