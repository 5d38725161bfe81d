//! The speed and scale scenarios P1-P5, P7 and P8 of the targets, one module per scenario (P3 and
//! P4 share the board P3 builds). What they share — the mock agent's chunk format, reading a
//! turn off a subscribed socket, sampling RSS, booting sessions — is [`shared`].

mod board;
mod churn;
mod containers;
mod flood;
mod idle;
mod runner;
pub(crate) mod shared;

pub use board::{p3, p4};
pub use churn::p5;
pub use containers::p8;
pub use flood::p1;
pub use idle::p2;
pub use runner::p7;
pub(crate) use shared::rss_sampler;
pub use shared::{expected_stream, read_turn};
