//! The state of one run on its isolate thread, reached by native callbacks through an isolate
//! slot.
//!
//! What never changes after the environment is installed (the intrinsics, the members, the error
//! classes, the channel to the host) is read without a borrow. Only [`RunState`], the mutable
//! part, sits in a `RefCell`, and no borrow of it is ever held across a call into JavaScript: a
//! conversion runs program getters, and a getter can call a binding or `setTimeout`, which borrow
//! the state themselves.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use code_runtime::provider::{CallId, FunctionId};

use crate::entropy::Entropy;
use crate::memory::MemoryBudget;
use crate::message::Outbox;
use crate::replay::LocalReplay;
use crate::termination::Termination;
use crate::transform::Positions;

/// The realm's own prototypes and constructors, captured before the program runs: a program can
/// replace any global, so shapes are compared against these.
pub(crate) struct Intrinsics {
    pub(crate) object_prototype: v8::Global<v8::Object>,
    pub(crate) array_prototype: v8::Global<v8::Object>,
    pub(crate) error: v8::Global<v8::Function>,
}

/// One binding member: which namespace, which name.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub(crate) namespace: usize,
    pub(crate) name: String,
    /// `global.name`, as messages name it.
    pub(crate) label: String,
    /// The positional argument names, when its input schema has them.
    pub(crate) parameters: Option<Vec<String>>,
}

/// The names `call_tool` takes (`code_runtime::provider::ToolIndex`), for lookups.
pub(crate) struct Tools {
    pub(crate) names: HashMap<String, FunctionId>,
    /// The names, listed for the message of an unknown one.
    pub(crate) listing: String,
}

/// A namespace's error class: its constructor and its member-name property, or the intrinsic
/// `Error` and none.
pub(crate) struct ErrorClass {
    pub(crate) constructor: v8::Global<v8::Function>,
    pub(crate) member_property: Option<String>,
}

/// Everything a native callback of one run needs.
pub(crate) struct Run {
    pub(crate) host: Outbox,
    pub(crate) intrinsics: Intrinsics,
    /// In [`FunctionId`] order.
    pub(crate) members: Vec<Member>,
    /// Per namespace.
    pub(crate) error_classes: Vec<ErrorClass>,
    /// What `call_tool` resolves, when the program has it.
    pub(crate) tools: Option<Tools>,
    pub(crate) bounds: Bounds,
    /// Output bytes the isolate may still send: the output budget plus one, less what it sent.
    /// The ledger counts at least as much, so a line that does not fit here cannot fit there;
    /// the isolate then ends the run itself instead of handing the host an oversized copy.
    pub(crate) output_left: Cell<usize>,
    /// The program's clock and random sources.
    pub(crate) entropy: Entropy,
    /// Where a compiled program's positions came from (see `transform.rs`).
    pub(crate) positions: Positions,
    pub(crate) state: RefCell<RunState>,
    /// The serializer of the `structuredClone` under way, if any (see `web.rs`).
    pub(crate) clone_oracle: RefCell<Option<CloneOracle>>,
}

/// The serializer one `structuredClone` asks about ordinary objects (`web.rs`'s `kind`): one for
/// the whole copy (a serializer per object cost more than the copy), charged to the run's memory
/// as it grows.
pub(crate) struct CloneOracle {
    pub(crate) serializer: v8::ValueSerializer<'static>,
    pub(crate) charged: usize,
    pub(crate) budget: Arc<MemoryBudget>,
}

impl Drop for CloneOracle {
    fn drop(&mut self) {
        self.budget.release_host(self.charged);
    }
}

/// What bounds a run's host-side copies and walks.
pub(crate) struct Bounds {
    pub(crate) termination: Arc<Termination>,
    pub(crate) budget: Arc<MemoryBudget>,
    pub(crate) max_output_bytes: usize,
}

/// The mutable part of a run.
#[derive(Default)]
pub(crate) struct RunState {
    /// Calls the host has not settled.
    pub(crate) pending: HashMap<CallId, Pending>,
    pub(crate) next_call: CallId,
    pub(crate) timers: BTreeMap<(Instant, u64), Timer>,
    pub(crate) timer_deadlines: HashMap<u64, Instant>,
    pub(crate) next_timer: u64,
    /// Rejections nobody handled yet (the program's own promise excluded).
    pub(crate) unhandled: Vec<(v8::Global<v8::Promise>, v8::Global<v8::Value>)>,
    /// Exceptions V8 reported with nobody to catch them (see `globals::uncaught`).
    pub(crate) reported: Vec<v8::Global<v8::Value>>,
    /// The program's promise.
    pub(crate) main: Option<v8::Global<v8::Promise>>,
    /// A resumed run's recorded answers, which the isolate gives itself.
    pub(crate) replay: LocalReplay,
    /// The `TextDecoder` streams of encodings other than UTF-8 that have not ended, by id
    /// (see `encoding.rs`).
    pub(crate) decoders: HashMap<u32, encoding_rs::Decoder>,
    pub(crate) next_decoder: u32,
}

/// A call the host has not settled: its promise, its member, and what it holds of the memory
/// budget (the host's copy of its argument, and its bookkeeping).
pub(crate) struct Pending {
    pub(crate) resolver: v8::Global<v8::PromiseResolver>,
    pub(crate) function: FunctionId,
    pub(crate) reserved: usize,
}

pub(crate) struct Timer {
    pub(crate) callback: v8::Global<v8::Function>,
    pub(crate) args: Vec<v8::Global<v8::Value>>,
    /// The run's memory its handles take, outside V8's heap, while it waits.
    pub(crate) _charge: crate::memory::HostCharge,
}

impl Timer {
    /// What the host holds for a timer with `args` arguments: a handle each (V8's global handle
    /// node and our slot for it) and the timer's own entries.
    pub(crate) fn host_bytes(args: usize) -> usize {
        const HANDLE: usize = 48;
        const TIMER: usize = 128;
        TIMER.saturating_add(args.saturating_add(1).saturating_mul(HANDLE))
    }
}

/// The run of the isolate `scope` belongs to, or `None` before the environment is installed.
pub(crate) fn of(scope: &v8::PinScope<'_, '_>) -> Option<Rc<Run>> {
    scope.get_slot::<Rc<Run>>().cloned()
}
