//! The Python provider of code-runtime: a fresh `python3 -I` child per run, JSON-lines frames over
//! fd 3, an embedded bootstrap, OS containment.
//!
//! Not implemented yet: this crate exists so the workspace has its final shape. It exports nothing,
//! so nothing can depend on behaviour it does not have. DESIGN.md §5 describes what it becomes.
