//! The TypeScript provider of code-runtime: a fresh V8 isolate per run on its own OS thread,
//! type-stripped TypeScript, hard budgets.
//!
//! Not implemented yet: this crate exists so the workspace has its final shape. It exports nothing,
//! so nothing can depend on behaviour it does not have. DESIGN.md §4 describes what it becomes.
