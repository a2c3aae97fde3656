//! Plumbing shared by the outbound capability hosts (`spin:redis`, `spin:mysql`,
//! `spin:postgres`): the view of the store their functions get, and access to
//! the resources (connections) they keep in the store's resource table.

use crate::error::HostError;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use wasmtime::component::{Accessor, HasData, Resource, ResourceTable};

/// How many entries each of Spin's per-instance tables holds: an instance's
/// Redis, MySQL and PostgreSQL connections and its PostgreSQL connection
/// builders (`spin_resource_table::Table`'s default capacity, which Spin's
/// Redis factor also gives its table explicitly).
pub const INSTANCE_TABLE_CAPACITY: usize = 1024;

/// How many resources of one kind one instance holds, counted against
/// [`INSTANCE_TABLE_CAPACITY`]. Each store needs its own (see the
/// capabilities' `for_instance`).
#[derive(Clone, Debug, Default)]
pub struct InstanceTable(Arc<AtomicUsize>);

/// One entry of an [`InstanceTable`], held by the resource; dropping it frees the place.
#[derive(Debug)]
pub struct TableSlot(Arc<AtomicUsize>);

impl InstanceTable {
    /// A place for one more resource, or `None` if the table is full.
    pub fn reserve(&self) -> Option<TableSlot> {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                (held < INSTANCE_TABLE_CAPACITY).then_some(held + 1)
            })
            .ok()
            .map(|_| TableSlot(self.0.clone()))
    }

    /// How many resources are held now.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

impl Drop for TableSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_holds_1024_and_frees_places_on_drop() {
        let table = InstanceTable::default();
        let mut held: Vec<TableSlot> = (0..INSTANCE_TABLE_CAPACITY).map(|_| table.reserve().unwrap()).collect();
        assert!(table.reserve().is_none(), "the 1025th");
        assert!(InstanceTable::default().reserve().is_some(), "another table counts on its own");
        held.pop();
        let again = table.reserve();
        assert!(again.is_some(), "a place is free again after a drop");
        drop((held, again));
        assert_eq!(table.held(), 0);
    }
}
