//! The plain data of a run as the isolate thread receives it, in either isolation mode: what its
//! isolate is made with ([`Shape`]) and what it runs ([`Program`], [`NamespaceSetup`]). No V8
//! type, so the wire and the host side use it without the isolate's code.

use code_runtime::provider::{Determinism, ProgramGlobal, Recorded, ToolIndex};

use crate::transform::Positions;

/// What an isolate is made with before its program is known: the same for every run of a
/// provider under the same limits, so a cell makes its isolate while it waits for a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub(crate) max_memory_mb: u64,
    pub(crate) allow_eval: bool,
    pub(crate) allow_wasm: bool,
}

impl Shape {
    /// The memory budget in bytes (saturating): the heap limit its isolate is made with.
    pub(crate) fn memory_bytes(&self) -> usize {
        usize::try_from(self.max_memory_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
    }
}

/// The run's program and what it may print, the same in both isolation modes (a cell receives
/// it as its setup frame).
#[derive(Debug)]
pub(crate) struct Program {
    /// The stripped program (see `strip::strip_program`).
    pub(crate) body: String,
    /// Where a compiled body's positions came from (empty when the body was erased, which
    /// keeps every position).
    pub(crate) positions: Positions,
    /// The names the program sees its environment under, in the order `globals::install` hands
    /// the values: `console`, the namespaces, the error classes, then `globals`' names.
    pub(crate) parameters: Vec<String>,
    pub(crate) namespaces: Vec<NamespaceSetup>,
    /// The globals besides those (bare functions, `call_tool`, values), in parameter order.
    pub(crate) globals: Vec<ProgramGlobal>,
    /// What `call_tool` resolves, when the program has it.
    pub(crate) tools: Option<ToolIndex>,
    pub(crate) max_output_bytes: usize,
    /// In a run that may pause or that resumes: the seed and clock origin of its `Math.random`,
    /// `Date` and `crypto` (see `entropy.rs`).
    pub(crate) determinism: Option<Determinism>,
    /// A resumed run's recorded answers by call number, which the isolate gives itself.
    pub(crate) replay: Vec<Option<Recorded>>,
}

/// What the isolate thread knows of one namespace.
#[derive(Debug)]
pub(crate) struct NamespaceSetup {
    pub(crate) global: String,
    pub(crate) names: Vec<String>,
    /// Per name, the positional argument names (`BindingFunction::parameters`), if any.
    pub(crate) parameters: Vec<Option<Vec<String>>>,
    pub(crate) error_class: Option<(String, String)>,
}
