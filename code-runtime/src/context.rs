//! [`Context`]: where a host registers its code runtimes at startup and consumers find them.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::ContextError;
use crate::language::{AsLanguage, UnknownLanguage};
use crate::runtime::CodeRuntime;

/// The capability registry a host builds at startup: at most one [`CodeRuntime`] per language,
/// fetched by consumers that know only the trait, and disposed with the context.
///
/// ```
/// # use std::sync::Arc;
/// # use code_runtime::{CodeRuntime, Context};
/// # async fn host(typescript: Arc<dyn CodeRuntime>, python: Arc<dyn CodeRuntime>) -> Result<(), code_runtime::ContextError> {
/// let context = Context::new();
/// context.provide_code_runtime(typescript)?; // registered under its `language()`
/// context.provide_code_runtime(python)?;
/// let runtime = context.code_runtime("python")?; // what a consumer does
/// # drop(runtime);
/// assert_eq!(context.languages(), ["python", "typescript"]);
/// context.dispose().await; // at shutdown; awaits every substrate's death
/// # Ok(()) }
/// ```
#[derive(Default)]
pub struct Context {
    slot: Mutex<Slot>,
    /// Serialises `dispose`, so a second caller returns only after the first reached quiescence.
    disposal: tokio::sync::Mutex<()>,
}

enum Slot {
    Open(BTreeMap<String, Arc<dyn CodeRuntime>>),
    Disposed,
}

impl Default for Slot {
    fn default() -> Self {
        Slot::Open(BTreeMap::new())
    }
}

impl Context {
    /// An empty context.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a provider under its [`language`](CodeRuntime::language).
    ///
    /// # Errors
    ///
    /// [`ContextError::AlreadyRegistered`] when a provider of that language is registered,
    /// [`ContextError::Disposed`] after [`dispose`](Context::dispose).
    pub fn provide_code_runtime(&self, runtime: Arc<dyn CodeRuntime>) -> Result<(), ContextError> {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        let Slot::Open(runtimes) = &mut *slot else { return Err(ContextError::Disposed) };
        let language = runtime.language().as_str().to_owned();
        if runtimes.contains_key(&language) {
            return Err(ContextError::AlreadyRegistered { language });
        }
        runtimes.insert(language, runtime);
        Ok(())
    }

    /// The provider registered for `language`: a [`Language`](crate::Language), or its name
    /// (`"typescript"`, `"python"`).
    ///
    /// # Errors
    ///
    /// [`ContextError::NotRegistered`] when none is (a name no language has included),
    /// [`ContextError::Disposed`] once disposal has begun.
    pub fn code_runtime(
        &self,
        language: impl AsLanguage,
    ) -> Result<Arc<dyn CodeRuntime>, ContextError> {
        let name = match language.as_language() {
            Ok(language) => language.as_str().to_owned(),
            Err(UnknownLanguage(name)) => name,
        };
        match &*self.slot.lock().unwrap_or_else(PoisonError::into_inner) {
            Slot::Open(runtimes) => {
                runtimes.get(&name).cloned().ok_or(ContextError::NotRegistered { language: name })
            }
            Slot::Disposed => Err(ContextError::Disposed),
        }
    }

    /// The languages registered, sorted; empty once disposed.
    pub fn languages(&self) -> Vec<String> {
        match &*self.slot.lock().unwrap_or_else(PoisonError::into_inner) {
            Slot::Open(runtimes) => runtimes.keys().cloned().collect(),
            Slot::Disposed => Vec::new(),
        }
    }

    /// Removes every provider and disposes them concurrently, completing once every substrate
    /// they started is gone. Later lookups fail. Idempotent; concurrent callers all wait for
    /// quiescence.
    ///
    /// # Cancel safety
    ///
    /// The providers leave the context at the first poll. Dropping the future before it completes
    /// drops the providers' own `dispose` futures, whose cancel safety each provider documents.
    pub async fn dispose(&self) {
        let _serialised = self.disposal.lock().await;
        let previous = {
            let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
            std::mem::replace(&mut *slot, Slot::Disposed)
        };
        if let Slot::Open(runtimes) = previous {
            futures::future::join_all(runtimes.values().map(|runtime| runtime.dispose())).await;
        }
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state: Vec<String> = match &*self.slot.lock().unwrap_or_else(PoisonError::into_inner) {
            Slot::Open(runtimes) => runtimes
                .values()
                .map(|runtime| format!("{} ({})", runtime.language(), runtime.isolation()))
                .collect(),
            Slot::Disposed => vec!["disposed".to_owned()],
        };
        f.debug_struct("Context").field("code_runtimes", &state).finish_non_exhaustive()
    }
}
