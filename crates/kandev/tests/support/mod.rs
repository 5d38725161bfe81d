//! The real-binary tests' shared support (kandev-testkit) with this crate's `kandev` binary,
//! whose path only this crate's tests know.

pub use kandev_testkit::server::*;

pub const KANDEV: Kandev = Kandev::at(env!("CARGO_BIN_EXE_kandev"));
