//! The kandev command line.
fn main() {}
