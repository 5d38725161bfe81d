//! Agent executors and process supervision: the only crate that starts processes.
