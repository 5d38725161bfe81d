//! The API tests, one test binary: each file of this folder is one module of it (a binary
//! per file linked the whole server dozens of times, gigabytes of disk for CI). Run one file's
//! tests with `cargo test -p kandev-server --test api -- board::` (or nextest's
//! `-E 'test(/^board::/)'`). `tidy` checks that every file here is listed below.

#![allow(clippy::disallowed_methods, reason = "tests spawn tasks and start processes freely")]

mod common;

mod accounts;
mod agents_auth;
mod bad_input;
mod board;
mod board_races;
mod checkpoints;
mod composer;
mod connections;
mod dependencies;
mod devservers;
mod durability;
mod executors;
mod intake;
mod lifecycle;
mod mcp;
mod mcp_questions;
mod mcp_servers;
mod pr_feedback;
mod retention;
mod secrets;
mod security;
mod session_controls;
mod sessions;
mod shipping;
mod streaming;
mod teams;
mod terminals;
mod ui;
mod user_terminals;
mod webhooks;
mod wire;
mod workflow_yaml;
mod workflows;
mod worktree_files;
mod worktree_setup;
mod worktrees;
