//! Terminal-UI state detection on recorded screens: every `tests/tui_screens/<agent>/<state>-<n>.txt`
//! (the raw bytes a real program wrote to a 40 × 120 PTY, recorded by `record.py`) is replayed
//! into a [`TuiScreen`] and must read as the state its name says.

use std::path::Path;

use kandev_runtime::tui_screen::{TuiAgent, TuiScreen, TuiState};

fn agent(name: &str) -> TuiAgent {
    match name {
        "fake" => TuiAgent::Fake,
        "claude" => TuiAgent::Claude,
        "codex" => TuiAgent::Codex,
        other => panic!("a recording folder for an unknown agent: {other}"),
    }
}

fn state(file: &str) -> TuiState {
    match file.rsplit_once('-').map(|(state, _)| state) {
        Some("working") => TuiState::Working,
        Some("waiting") => TuiState::WaitingForInput,
        Some("permission") => TuiState::NeedsPermission,
        Some("unknown") => TuiState::Unknown,
        _ => panic!("a recording named for no state: {file}"),
    }
}

#[test]
fn i52_each_recorded_screen_reads_as_the_state_it_is_named_for() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tui_screens");
    let mut checked = Vec::new();
    let mut wrong = Vec::new();
    for folder in std::fs::read_dir(&root).unwrap() {
        let folder = folder.unwrap().path();
        if !folder.is_dir() {
            continue;
        }
        let agent = agent(folder.file_name().unwrap().to_str().unwrap());
        for file in std::fs::read_dir(&folder).unwrap() {
            let path = file.unwrap().path();
            let Some(name) = path.file_name().unwrap().to_str().unwrap().strip_suffix(".txt")
            else {
                continue;
            };
            let mut screen = TuiScreen::new(agent, 40, 120);
            screen.feed(&std::fs::read(&path).unwrap());
            let (want, got) = (state(name), screen.state());
            checked.push((agent, want));
            if want != got {
                wrong.push(format!("{}: {got:?}\n{}", path.display(), screen.rows().join("\n")));
            }
        }
    }
    assert!(wrong.is_empty(), "misread screens:\n{}", wrong.join("\n\n"));
    // Every agent has every state it can be recorded in (Claude's login-less start is Unknown).
    for agent in [TuiAgent::Fake, TuiAgent::Claude, TuiAgent::Codex] {
        for state in [TuiState::Working, TuiState::WaitingForInput, TuiState::NeedsPermission] {
            assert!(checked.contains(&(agent, state)), "no recording of {agent:?} {state:?}");
        }
    }
    assert!(checked.contains(&(TuiAgent::Claude, TuiState::Unknown)));
}

#[test]
fn i52_a_recording_fed_in_small_pieces_reads_the_same() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tui_screens");
    for (agent, file, want) in [
        (TuiAgent::Claude, "claude/permission-1.txt", TuiState::NeedsPermission),
        (TuiAgent::Codex, "codex/working-1.txt", TuiState::Working),
    ] {
        let bytes = std::fs::read(root.join(file)).unwrap();
        let mut screen = TuiScreen::new(agent, 40, 120);
        for piece in bytes.chunks(7) {
            screen.feed(piece);
        }
        assert_eq!(screen.state(), want, "{file}");
    }
}
