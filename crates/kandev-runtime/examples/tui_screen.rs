//! Shows a recorded terminal-UI screen as text and the state each agent's rules read from it:
//! `cargo run -p kandev-runtime --example tui_screen -- <recording> [rows cols]` (the
//! recordings of `tests/tui_screens/` are 40 × 120).

use kandev_runtime::tui_screen::{TuiAgent, TuiScreen};

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: tui_screen <recording> [rows cols]");
        return std::process::ExitCode::FAILURE;
    };
    let number =
        |i: usize, default: u16| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (rows, cols) = (number(1, 40), number(2, 120));
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) => {
            eprintln!("error: {path}: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    for agent in [TuiAgent::Fake, TuiAgent::Claude, TuiAgent::Codex] {
        let mut screen = TuiScreen::new(agent, rows, cols);
        screen.feed(&bytes);
        if agent == TuiAgent::Fake {
            for (n, row) in screen.rows().iter().enumerate() {
                println!("{n:2}|{row}");
            }
        }
        println!("{agent:?}: {:?}", screen.state());
    }
    std::process::ExitCode::SUCCESS
}
