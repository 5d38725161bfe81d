//! The speed and scale scenarios P1-P5 and P7-P9 of the targets, one module per scenario (P3
//! and P4 share the board P3 builds; P9, a team's day, is a folder). What they share — the
//! mock agent's chunk format, reading a turn off a subscribed socket, sampling RSS, booting
//! sessions — is [`shared`].

mod board;
mod churn;
mod containers;
mod day;
mod flood;
mod idle;
mod runner;
pub(crate) mod shared;

pub use board::{p3, p4};
pub use churn::p5;
pub use containers::p8;
pub use day::p9;
pub use flood::p1;
pub use idle::p2;
pub use runner::p7;
pub(crate) use shared::rss_sampler;
pub use shared::{expected_stream, read_turn};
