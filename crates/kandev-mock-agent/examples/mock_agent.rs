//! Runs the mock agent on stdin/stdout without the `kandev` binary:
//! `cargo run -p kandev-mock-agent --example mock_agent -- [flags]`.

use kandev_mock_agent::{MockConfig, run_stdio};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match MockConfig::from_args(&args) {
        Ok(config) => config,
        Err(error) => error.0.exit(),
    };
    // Exit right away: tokio's stdin holds a blocking read that would delay runtime shutdown.
    std::process::exit(run_stdio(config).await);
}
