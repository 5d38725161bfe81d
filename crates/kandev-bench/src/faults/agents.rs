//! R2: agent faults (crashes, hangs, garbage, huge lines, slow starts, failed loads) each end
//! in their specified state within their bound, and the session can be deleted.

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{Value, json};

use crate::harness::{self, Server, ms, str_of};
use crate::{Ctx, Report};

/// How an R2 case is expected to end.
#[derive(Clone, Copy)]
enum Expect {
    /// The reply `echo: <prompt>` arrives, no error.
    Reply,
    /// Idle (`WAITING_FOR_INPUT`) again, no matter the error.
    Idle,
    /// `last_error` set with a readable message, session idle or failed.
    Error,
}

struct Case {
    name: &'static str,
    args: &'static [&'static str],
    /// Stop the agent first so the prompt resumes with `session/load`.
    stop_first: bool,
    script: &'static str,
    cancel: bool,
    expect: Expect,
    bound: Duration,
}

pub async fn r2(ctx: &Ctx) -> Result<Report> {
    let s = Duration::from_secs;
    let cases = vec![
        Case {
            name: "crash_mid_turn",
            args: &[],
            stop_first: false,
            script: "#!mock\nsay before\ncrash 3",
            cancel: false,
            expect: Expect::Error,
            bound: s(10),
        },
        Case {
            name: "hang_then_cancel",
            args: &[],
            stop_first: false,
            script: "#!mock\nsay before\nhang",
            cancel: true,
            expect: Expect::Idle,
            bound: s(15),
        },
        Case {
            name: "hang_on_cancel",
            args: &["--hang-on-cancel"],
            stop_first: false,
            script: "#!mock\nsay before\nsleep 60000",
            cancel: true,
            expect: Expect::Idle,
            bound: s(15),
        },
        Case {
            name: "garbage_line",
            args: &[],
            stop_first: false,
            script: "#!mock\ngarbage\nsay after",
            cancel: false,
            expect: Expect::Idle,
            bound: s(10),
        },
        Case {
            name: "line_16_mib",
            args: &[],
            stop_first: false,
            script: "#!mock\nbigline 16777216\nsay after",
            cancel: false,
            expect: Expect::Idle,
            bound: s(30),
        },
        Case {
            name: "startup_delay_2s",
            args: &["--startup-delay-ms", "2000"],
            stop_first: false,
            script: "hello",
            cancel: false,
            expect: Expect::Reply,
            bound: s(10),
        },
        Case {
            name: "never_answers_initialize",
            args: &["--startup-delay-ms", "3600000"],
            stop_first: false,
            script: "hello",
            cancel: false,
            expect: Expect::Error,
            bound: s(75),
        },
        Case {
            name: "fail_load_method_not_found",
            args: &["--fail-load", "method-not-found"],
            stop_first: true,
            script: "hello",
            cancel: false,
            expect: Expect::Reply,
            bound: s(10),
        },
        Case {
            name: "fail_load_unknown_session",
            args: &["--fail-load", "unknown-session"],
            stop_first: true,
            script: "hello",
            cancel: false,
            expect: Expect::Reply,
            bound: s(10),
        },
        Case {
            name: "fail_load_auth",
            args: &["--fail-load", "auth"],
            stop_first: true,
            script: "hello",
            cancel: false,
            expect: Expect::Error,
            bound: s(10),
        },
        Case {
            name: "fail_load_internal",
            args: &["--fail-load", "internal"],
            stop_first: true,
            script: "hello",
            cancel: false,
            expect: Expect::Error,
            bound: s(10),
        },
        Case {
            name: "fail_load_timeout",
            args: &["--fail-load", "timeout"],
            stop_first: true,
            script: "hello",
            cancel: false,
            expect: Expect::Error,
            bound: s(75),
        },
    ];
    let mut report =
        Report::new("R2", json!({"cases": cases.iter().map(|c| c.name).collect::<Vec<_>>()}));
    let home = ctx.home("r2")?;
    let server = harness::start(&ctx.kandev, &home, &[])?;
    let (workflow, _) = server.board("R2").await?;
    let results =
        futures::future::join_all(cases.iter().map(|c| run_case(&server, &workflow, c))).await;
    let mut figures = json!({});
    for (case, result) in cases.iter().zip(results) {
        match result {
            Ok(outcome) => {
                if let Some(problem) = &outcome.problem {
                    report.failures.push(format!("{}: {problem}", case.name));
                }
                figures[case.name] = outcome.figures;
            }
            Err(e) => report.failures.push(format!("{}: {e:#}", case.name)),
        }
    }
    report.figures = figures;
    let left = harness::wait_no_agents(&home, Duration::from_secs(20)).await;
    report.check(left.is_empty(), format!("agents left after deleting every session: {left:?}"));
    Ok(report)
}

struct Outcome {
    figures: Value,
    problem: Option<String>,
}

async fn run_case(server: &Server, workflow: &str, case: &Case) -> Result<Outcome> {
    let mut profile = None;
    if !case.args.is_empty() {
        let made = server
            .call(
                "agent.profile.create",
                json!({"name": format!("r2 {}", case.name), "kind": "mock", "args": case.args}),
            )
            .await?;
        profile = Some(str_of(&made["profile"]["id"])?);
    }
    let task =
        server.call("task.create", json!({"workflow_id": workflow, "title": case.name})).await?;
    let mut launch = json!({"task_id": task["task"]["id"]});
    if let Some(p) = &profile {
        launch["agent_profile_id"] = json!(p);
    }
    let boots_with_prompt = matches!(case.name, "startup_delay_2s" | "never_answers_initialize");
    if boots_with_prompt {
        launch["prompt"] = json!(case.script);
    }
    let started = Instant::now();
    let session = str_of(&server.call("session.launch", launch).await?["session"]["id"])?;
    if !boots_with_prompt {
        server.wait_state(&session, &["WAITING_FOR_INPUT"], Duration::from_secs(30)).await?;
        if case.stop_first {
            server.call("session.stop", json!({"id": session})).await?;
            server.wait_state(&session, &["WAITING_FOR_INPUT"], Duration::from_secs(30)).await?;
        }
    }
    let mut started_at = started;
    if !boots_with_prompt {
        started_at = Instant::now();
        server.call("message.add", json!({"session_id": session, "content": case.script})).await?;
    }
    if case.cancel {
        server.wait_state(&session, &["RUNNING"], Duration::from_secs(10)).await?;
        // Let the agent start the turn before cancelling.
        tokio::time::sleep(Duration::from_millis(200)).await;
        started_at = Instant::now();
        server.call("agent.cancel", json!({"session_id": session})).await?;
    }
    let mut problem = None;
    let final_session;
    loop {
        let s = server.session(&session).await?;
        let state = s["state"].as_str().unwrap_or("").to_owned();
        let idle = state == "WAITING_FOR_INPUT";
        let done = match case.expect {
            Expect::Reply => {
                idle && server
                    .messages(&session)
                    .await?
                    .iter()
                    .any(|m| m["content"] == "echo: hello")
            }
            Expect::Idle => idle,
            Expect::Error => (idle || state == "FAILED") && !s["last_error"].is_null(),
        };
        if done {
            final_session = s;
            break;
        }
        if started_at.elapsed() > case.bound {
            problem = Some(format!(
                "not settled within {:?}: state {state}, last_error {}",
                case.bound, s["last_error"]
            ));
            final_session = s;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = ms(started_at.elapsed());
    let error = &final_session["last_error"];
    if problem.is_none() {
        match case.expect {
            Expect::Reply if !error.is_null() => {
                problem = Some(format!("unexpected error {error}"))
            }
            Expect::Error => {
                let message = error["message"].as_str().unwrap_or("");
                if message.trim().is_empty()
                    || message.len() > 4096
                    || error["code"].as_str().is_none()
                {
                    problem = Some(format!("unreadable error {error}"));
                }
            }
            _ => {}
        }
    }
    if case.name == "startup_delay_2s" && elapsed < 2000.0 {
        problem = Some(format!("answered after {elapsed} ms, before the 2 s delay"));
    }
    // The session can be deleted, whatever happened.
    let deleted = Instant::now();
    let delete = server.call("session.delete", json!({"id": session})).await;
    let delete_ms = ms(deleted.elapsed());
    let (status, _) = server.call_raw("session.get", json!({"id": session})).await?;
    if delete.is_err() || status != 404 {
        problem
            .get_or_insert(format!("delete failed ({delete:?}) or session still there ({status})"));
    }
    Ok(Outcome {
        figures: json!({
            "state": final_session["state"],
            "last_error_code": error["code"],
            "last_error": error["message"],
            "settled_ms": elapsed,
            "bound_ms": case.bound.as_millis() as u64,
            "delete_ms": delete_ms,
        }),
        problem,
    })
}
