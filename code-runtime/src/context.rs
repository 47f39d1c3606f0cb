//! [`Context`]: where a host registers its one code runtime at startup and consumers find it.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::ContractError;
use crate::runtime::CodeRuntime;

/// The capability registry a host builds at startup: exactly one [`CodeRuntime`] provider, fetched
/// by consumers that know only the trait, and disposed with the context.
///
/// ```
/// # use std::sync::Arc;
/// # use code_runtime::{CodeRuntime, Context};
/// # async fn host(provider: Arc<dyn CodeRuntime>) -> Result<(), code_runtime::ContractError> {
/// let context = Context::new();
/// context.provide_code_runtime(provider)?;
/// let runtime = context.code_runtime()?; // what consumers do
/// # drop(runtime);
/// context.dispose().await; // at shutdown; awaits every substrate's death
/// # Ok(()) }
/// ```
#[derive(Default)]
pub struct Context {
    slot: Mutex<Slot>,
    /// Serialises `dispose`, so a second caller returns only after the first reached quiescence.
    disposal: tokio::sync::Mutex<()>,
}

#[derive(Default)]
enum Slot {
    #[default]
    Empty,
    Registered(Arc<dyn CodeRuntime>),
    Disposed,
}

impl Context {
    /// An empty context.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the context's provider.
    ///
    /// # Errors
    ///
    /// [`ContractError::AlreadyRegistered`] when a provider is already registered,
    /// [`ContractError::ContextDisposed`] after [`dispose`](Context::dispose).
    pub fn provide_code_runtime(&self, runtime: Arc<dyn CodeRuntime>) -> Result<(), ContractError> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        match *slot {
            Slot::Empty => {
                *slot = Slot::Registered(runtime);
                Ok(())
            }
            Slot::Registered(_) => Err(ContractError::AlreadyRegistered),
            Slot::Disposed => Err(ContractError::ContextDisposed),
        }
    }

    /// The registered provider.
    ///
    /// # Errors
    ///
    /// [`ContractError::NotRegistered`] before registration, [`ContractError::ContextDisposed`]
    /// once disposal has begun.
    pub fn code_runtime(&self) -> Result<Arc<dyn CodeRuntime>, ContractError> {
        match &*self.slot.lock().unwrap_or_else(PoisonError::into_inner) {
            Slot::Empty => Err(ContractError::NotRegistered),
            Slot::Registered(runtime) => Ok(Arc::clone(runtime)),
            Slot::Disposed => Err(ContractError::ContextDisposed),
        }
    }

    /// Removes the provider and disposes it, completing once every substrate it started is gone.
    /// Later calls of [`code_runtime`](Context::code_runtime) fail. Idempotent; concurrent callers
    /// all wait for quiescence.
    ///
    /// # Cancel safety
    ///
    /// The provider leaves the context at the first poll. Dropping the future before it completes
    /// drops the provider's own `dispose` future, whose cancel safety the provider documents.
    pub async fn dispose(&self) {
        let _serialised = self.disposal.lock().await;
        let previous = {
            let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
            std::mem::replace(&mut *slot, Slot::Disposed)
        };
        if let Slot::Registered(runtime) = previous {
            runtime.dispose().await;
        }
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &*self.slot.lock().unwrap_or_else(PoisonError::into_inner) {
            Slot::Empty => "empty".to_owned(),
            Slot::Registered(runtime) => {
                format!("{} ({})", runtime.language(), runtime.isolation())
            }
            Slot::Disposed => "disposed".to_owned(),
        };
        f.debug_struct("Context").field("code_runtime", &state).finish_non_exhaustive()
    }
}
