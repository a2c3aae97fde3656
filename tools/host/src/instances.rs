//! Instance management: which component instance serves which request.
//!
//! Follows Spin 4.1's reuse of WASIp3 instances (`crates/trigger-http`: by
//! default at most 128 requests per instance, 16 at once, dropped after 1 s
//! idle) by driving the same worker pool,
//! `wasmtime_wasi_http::handler::ProxyHandler`: each worker owns one store and
//! instance, runs up to `max_concurrent` requests at once inside that store's
//! `run_concurrent` event loop, accepts at most `max_requests` in total, and is
//! dropped after [`IDLE_INSTANCE_TIMEOUT`] without work. When every live
//! worker is saturated, the handler starts another.

use crate::InstanceMode;
use crate::engine;
use crate::store::{self, ComponentContext, StoreState};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::time::Sleep;
use wasmtime::component::GuestTaskId;
use wasmtime::{Engine, Store, StoreContextMut};
use wasmtime_wasi_http::handler::{
    HandlerState, Instance, Proxy, ProxyHandler, ShouldAccept, WorkerExpiration, WorkerState, WorkerStatus,
};
use wasmtime_wasi_http::p3::bindings::ServicePre;

/// How long an idle reusable instance is kept: Spin's `--idle-instance-timeout` default.
pub const IDLE_INSTANCE_TIMEOUT: Duration = Duration::from_secs(1);

/// Per-instance request limits derived from an [`InstanceMode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReuseLimits {
    /// Requests one instance serves in total.
    pub max_requests: usize,
    /// Requests one instance serves at the same time.
    pub max_concurrent: usize,
}

impl ReuseLimits {
    /// The limits for `mode`; `PerRequest` is one request per instance.
    pub fn for_mode(mode: &InstanceMode) -> ReuseLimits {
        match *mode {
            InstanceMode::PerRequest => ReuseLimits { max_requests: 1, max_concurrent: 1 },
            InstanceMode::Reuse { max_requests, max_concurrent } => {
                ReuseLimits { max_requests: max_requests.max(1), max_concurrent: max_concurrent.max(1) }
            }
        }
    }

    /// Whether an instance with `concurrent` running and `total` accepted requests takes one more.
    pub fn should_accept(&self, concurrent: usize, total: usize) -> ShouldAccept {
        if total >= self.max_requests {
            ShouldAccept::Never
        } else if concurrent >= self.max_concurrent {
            ShouldAccept::No
        } else {
            ShouldAccept::Yes
        }
    }
}

/// Creates instances of one component for the [`ProxyHandler`].
pub struct ComponentInstances {
    engine: Engine,
    service: ServicePre<StoreState>,
    context: ComponentContext,
    limits: ReuseLimits,
}

/// The request dispatcher of one component.
pub type ComponentHandler = ProxyHandler<ComponentInstances>;

impl ComponentInstances {
    /// A handler for the pre-linked `service` of `context`'s component.
    pub fn handler(
        engine: Engine,
        service: ServicePre<StoreState>,
        context: ComponentContext,
        mode: &InstanceMode,
    ) -> ComponentHandler {
        ProxyHandler::new(ComponentInstances { engine, service, context, limits: ReuseLimits::for_mode(mode) })
    }
}

impl HandlerState for ComponentInstances {
    type StoreData = StoreState;
    type WorkerExpiration = IdleExpiration;
    type WorkerState = WorkerLimits;

    async fn instantiate(&self) -> wasmtime::Result<Instance<StoreState, IdleExpiration, WorkerLimits>> {
        let mut store = Store::new(&self.engine, StoreState::new(&self.context));
        let service = self.service.instantiate_async(&mut store).await?;
        Ok(Instance {
            store,
            proxy: Proxy::P3(service),
            view: store::http_view,
            expiration: IdleExpiration::new(IDLE_INSTANCE_TIMEOUT),
            state: WorkerLimits {
                limits: self.limits,
                component: self.context.id.clone(),
                host_stopping: self.context.host_stopping.clone(),
            },
        })
    }
}

/// Ends a worker that has been idle for too long; requests themselves never time out
/// (Spin's default has no request timeout).
pub struct IdleExpiration {
    idle_timeout: Duration,
    sleep: Pin<Box<Sleep>>,
}

impl IdleExpiration {
    fn new(idle_timeout: Duration) -> IdleExpiration {
        IdleExpiration { idle_timeout, sleep: Box::pin(tokio::time::sleep(idle_timeout)) }
    }
}

impl WorkerExpiration for IdleExpiration {
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>, status: WorkerStatus, start: Instant) -> Poll<()> {
        let this = self.get_mut();
        if status != WorkerStatus::Idle {
            return Poll::Pending;
        }
        let deadline = tokio::time::Instant::from_std(start + this.idle_timeout);
        if this.sleep.deadline() != deadline {
            this.sleep.as_mut().reset(deadline);
        }
        this.sleep.as_mut().poll(cx)
    }
}

/// The request limits of one worker.
pub struct WorkerLimits {
    limits: ReuseLimits,
    component: String,
    host_stopping: Arc<AtomicBool>,
}

impl WorkerState for WorkerLimits {
    type StoreData = StoreState;
    type RequestData = ();

    fn should_accept_request(&self, concurrent_count: usize, total_count: usize) -> ShouldAccept {
        self.limits.should_accept(concurrent_count, total_count)
    }

    fn on_request_start(
        &self,
        _store: StoreContextMut<'_, StoreState>,
        _data: (),
        _task: GuestTaskId,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + Sync>> {
        Box::pin(std::future::pending())
    }

    fn drop(&self, store: Store<StoreState>, result: wasmtime::Result<()>) {
        let stopping = self.host_stopping.load(Ordering::Relaxed);
        if let Err(error) = result
            && !stopping
        {
            eprintln!("unread-host: instance of `{}` failed: {error:?}", self.component);
        }
        drop(store);
    }
}

/// Builds the handler for one component: compiles (or reuses) the file and pre-links it.
pub fn component_handler(
    engine: &Engine,
    linker: &wasmtime::component::Linker<StoreState>,
    component: &wasmtime::component::Component,
    context: ComponentContext,
    mode: &InstanceMode,
) -> anyhow::Result<ComponentHandler> {
    let service = engine::prepare_service(linker, component, &context.id)?;
    Ok(ComponentInstances::handler(engine.clone(), service, context, mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepts(limits: ReuseLimits, concurrent: usize, total: usize) -> &'static str {
        match limits.should_accept(concurrent, total) {
            ShouldAccept::Yes => "yes",
            ShouldAccept::No => "no",
            ShouldAccept::Never => "never",
        }
    }

    #[test]
    fn per_request_serves_exactly_one() {
        let limits = ReuseLimits::for_mode(&InstanceMode::PerRequest);
        assert_eq!(accepts(limits, 0, 0), "yes");
        assert_eq!(accepts(limits, 0, 1), "never");
    }

    #[test]
    fn reuse_limits_concurrency_then_total() {
        let limits = ReuseLimits::for_mode(&InstanceMode::Reuse { max_requests: 3, max_concurrent: 2 });
        assert_eq!(accepts(limits, 1, 1), "yes");
        assert_eq!(accepts(limits, 2, 2), "no");
        assert_eq!(accepts(limits, 0, 3), "never");
    }

    #[test]
    fn zero_limits_still_serve() {
        let limits = ReuseLimits::for_mode(&InstanceMode::Reuse { max_requests: 0, max_concurrent: 0 });
        assert_eq!(limits, ReuseLimits { max_requests: 1, max_concurrent: 1 });
    }

    #[test]
    fn spin_default_is_reuse_128_16() {
        assert_eq!(
            ReuseLimits::for_mode(&InstanceMode::spin_default()),
            ReuseLimits { max_requests: 128, max_concurrent: 16 }
        );
    }
}
