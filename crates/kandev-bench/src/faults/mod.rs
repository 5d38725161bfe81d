//! The fault harness: R1 (kill -9 cycles), R2 (agent faults), R4 (hostile input), R5
//! (security), R6 (kill -9 with the local runner: turns go on). Each ends with pass/fail and the figures behind it.
//! One module per fault family; what they share is [`crate::harness`].

mod agents;
mod hostile;
mod restart;
mod runner;
mod security;

pub use agents::r2;
pub use hostile::r4;
pub use restart::r1;
pub use runner::{R6On, r6};
pub use security::r5;
