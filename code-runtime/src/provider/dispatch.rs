//! Binding dispatch: the request's functions as one table ([`BindingTable`]), and the calls in
//! flight of one run ([`Calls`]), each checked once when it settles.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};

use crate::binding::{BindingArgs, BindingError, BindingFunction, CodeBindingNamespace};
use crate::json::{self, JsonValue};
use crate::provider::{catalogue, reactor};

/// A substrate's name for one call, unique within its run; the host answers it once.
pub type CallId = u64;

/// A function of the request, by position: namespaces in request order, then functions in
/// declaration order. Substrates install members in this order, so position `n` is the `n`th
/// member they created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FunctionId(pub u32);

/// The request's functions, flattened in [`FunctionId`] order, each with its `global.name` label.
#[derive(Debug)]
pub struct BindingTable {
    functions: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    global: String,
    name: String,
    label: String,
    function: BindingFunction,
}

impl BindingTable {
    /// The table of `namespaces`.
    pub fn new(namespaces: &[CodeBindingNamespace]) -> Self {
        let functions = namespaces
            .iter()
            .flat_map(|namespace| {
                namespace.functions.iter().map(|(name, function)| Entry {
                    global: namespace.global.clone(),
                    name: name.clone(),
                    label: format!("{}.{name}", namespace.global),
                    function: function.clone(),
                })
            })
            .collect();
        Self { functions }
    }

    /// The function `name` of the namespace `global`, matched exactly.
    pub fn find(&self, global: &str, name: &str) -> Option<FunctionId> {
        let index =
            self.functions.iter().position(|entry| entry.global == global && entry.name == name)?;
        u32::try_from(index).ok().map(FunctionId)
    }

    /// `global.name` of a function, as messages name it.
    pub fn label(&self, id: FunctionId) -> Option<&str> {
        self.entry(id).map(|entry| entry.label.as_str())
    }

    /// How many functions there are.
    pub fn len(&self) -> usize {
        self.functions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }

    fn entry(&self, id: FunctionId) -> Option<&Entry> {
        self.functions.get(usize::try_from(id.0).ok()?)
    }
}

type Settled = (CallId, Result<JsonValue, BindingError>);

/// The binding calls in flight of one run. Dropping it cancels them (drops their futures).
pub(crate) struct Calls {
    table: Arc<BindingTable>,
    in_flight: FuturesUnordered<Pin<Box<dyn Future<Output = Settled> + Send>>>,
}

impl Calls {
    pub(crate) fn new(table: Arc<BindingTable>) -> Self {
        Self { table, in_flight: FuturesUnordered::new() }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.in_flight.is_empty()
    }

    /// Starts a call: the host closure runs now, its future is polled with the others.
    pub(crate) fn start(&mut self, id: CallId, function: FunctionId, args: BindingArgs) {
        let table = self.table.clone();
        let Some(entry) = self.table.entry(function) else {
            // A substrate only names functions it was given; answer a stray id anyway.
            drop(args);
            let rejection =
                BindingError::new(catalogue::unknown_binding(&format!("#{}", function.0)));
            self.in_flight.push(Box::pin(std::future::ready((id, Err(rejection)))));
            return;
        };
        // The closure's synchronous part runs here and may panic as well as its future.
        let call = std::panic::catch_unwind(AssertUnwindSafe(|| entry.function.call(args)));
        self.in_flight.push(Box::pin(reactor::in_some_runtime(async move {
            let outcome = match call {
                Ok(future) => AssertUnwindSafe(future).catch_unwind().await,
                Err(panic) => Err(panic),
            };
            let outcome = match outcome {
                Ok(outcome) => outcome,
                Err(panic) => Err(panicked(&table, function, &*panic)),
            };
            (id, checked(&table, function, outcome))
        })));
    }

    /// The next call to settle, checked (see [`checked`]).
    pub(crate) fn poll_settled(&mut self, cx: &mut Context<'_>) -> Poll<Option<Settled>> {
        self.in_flight.poll_next_unpin(cx)
    }
}

/// A settled call as the program may see it: a resolution must be lossless JSON, a rejection's
/// data too. What is not becomes a rejection naming the binding (or data-less), and the host hears
/// of it through `tracing`.
fn checked(
    table: &BindingTable,
    function: FunctionId,
    outcome: Result<JsonValue, BindingError>,
) -> Result<JsonValue, BindingError> {
    let label = table.label(function).unwrap_or_default();
    match outcome {
        Ok(value) => match json::validate(&value) {
            Ok(()) => Ok(value),
            Err(why) => {
                json::drop_value(value);
                tracing::warn!(binding = label, %why, "binding resolved with a value that is not lossless JSON");
                Err(BindingError::new(catalogue::lossy_resolution(label, &why.to_string())))
            }
        },
        Err(mut error) => {
            if let Some(data) = error.take_data() {
                match json::validate(&data) {
                    Ok(()) => error = error.with_data(data),
                    Err(why) => {
                        json::drop_value(data);
                        tracing::warn!(binding = label, %why, "binding rejected with data that is not lossless JSON; the program sees no data");
                    }
                }
            }
            Err(error)
        }
    }
}

fn panicked(
    table: &BindingTable,
    function: FunctionId,
    payload: &(dyn std::any::Any + Send),
) -> BindingError {
    let label = table.label(function).unwrap_or_default();
    let detail = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a non-string payload");
    tracing::error!(binding = label, panic = detail, "binding panicked");
    BindingError::new(catalogue::panicked(label))
}
