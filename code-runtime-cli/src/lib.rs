//! The library half of the `code-runtime` command: the bindings-file format of CLI.md, shared with
//! the conformance suite so a case's bindings mean exactly what they mean on the command line.

pub mod bindings_file;
