//! The CLI's client side: task and workflow commands sent to a running server over HTTP, with
//! the request and response types of the action table (`kandev_api_types::actions`).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use kandev_api_types::actions::{self, Action};
use kandev_api_types::requests as rq;
use kandev_api_types::{TaskCardDto, WorkflowDto};
use serde_json::Value;

#[derive(Args, Debug)]
pub struct ServerArgs {
    /// Address of the running server.
    #[arg(long, global = true, env = "KANDEV_URL", default_value = "http://127.0.0.1:38429")]
    server: String,
    /// Access token, when the server was started with one.
    #[arg(long, global = true, env = "KANDEV_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Print the server's JSON answer instead of a summary.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand, Debug)]
pub enum TaskCommand {
    /// Create a task on a board.
    Create {
        /// Workflow (board) id; see `workflow.list`.
        #[arg(long)]
        workflow: String,
        #[arg(long)]
        title: String,
        #[arg(long)]
        description: Option<String>,
        /// Step id to create it in (default: the board's start step).
        #[arg(long)]
        step: Option<String>,
        /// Repository id to work in (repeatable).
        #[arg(long = "repository")]
        repositories: Vec<String>,
        /// Agent profile id.
        #[arg(long)]
        profile: Option<String>,
    },
    /// List the tasks of a board in board order.
    List {
        #[arg(long)]
        workflow: String,
        /// Only tasks whose title or description contains this text.
        #[arg(long)]
        query: Option<String>,
        /// Include archived tasks.
        #[arg(long)]
        archived: bool,
    },
    /// Move a task to a step, or to a position within its step.
    Move {
        /// Task id.
        id: String,
        /// Target step id.
        #[arg(long)]
        step: String,
        /// 0-based position in the step (default: the end).
        #[arg(long)]
        position: Option<u32>,
    },
}

#[derive(Subcommand, Debug)]
pub enum WorkflowCommand {
    /// Write workflows as a portable YAML document.
    Export {
        /// Workflow ids.
        #[arg(required = true)]
        ids: Vec<String>,
        /// File to write (default: standard output).
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Create workflows from a YAML document; nothing is imported if it has problems.
    Import {
        /// Workspace to import into.
        #[arg(long)]
        workspace: String,
        /// The YAML file.
        file: PathBuf,
    },
}

struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

/// An action's answer: typed, and as the server sent it (printed by `--json`).
struct Answer<A: Action> {
    typed: A::Response,
    raw: Value,
}

impl Client {
    fn new(args: &ServerArgs) -> Client {
        Client {
            http: reqwest::Client::new(),
            base: args.server.trim_end_matches('/').to_owned(),
            token: args.token.clone(),
        }
    }

    async fn call<A: Action>(&self, request: &A::Request) -> Result<Answer<A>> {
        let action = A::NAME;
        let mut post = self.http.post(format!("{}/api/v1/{action}", self.base)).json(request);
        if let Some(token) = &self.token {
            post = post.bearer_auth(token);
        }
        let response = post.send().await.with_context(|| {
            format!("cannot reach the server at {}; is `kandev serve` running?", self.base)
        })?;
        let ok = response.status().is_success();
        let raw: Value =
            response.json().await.context("the server sent an answer that is not JSON")?;
        if !ok {
            let message = raw["message"].as_str().unwrap_or("request failed");
            let code = raw["code"].as_str().unwrap_or("ERROR");
            let mut text = format!("{message} ({code})");
            for problem in raw["details"]["problems"].as_array().into_iter().flatten() {
                let path = problem["path"].as_str().unwrap_or("?");
                text.push_str(&format!(
                    "\n  {path}: {}",
                    problem["message"].as_str().unwrap_or("")
                ));
            }
            bail!(text);
        }
        let typed = serde_json::from_value(raw.clone()).with_context(|| {
            format!("the server's answer to {action} is not what this kandev expects; is it the same version?")
        })?;
        Ok(Answer { typed, raw })
    }
}

fn print_json(value: &Value) {
    println!("{}", serde_json::to_string_pretty(value).unwrap_or_default());
}

pub async fn task(args: ServerArgs, command: TaskCommand) -> Result<()> {
    let client = Client::new(&args);
    match command {
        TaskCommand::Create { workflow, title, description, step, repositories, profile } => {
            let request = rq::TaskCreate {
                workflow_id: workflow,
                title,
                description,
                step_id: step,
                repository_ids: repositories,
                agent_profile_id: profile,
                start_agent: false,
            };
            let result = client.call::<actions::TaskCreate>(&request).await?;
            if args.json {
                print_json(&result.raw);
            } else {
                println!("{}", result.typed.task.id);
            }
        }
        TaskCommand::List { workflow, query, archived } => {
            let get = rq::ById { id: workflow.clone() };
            let board = client.call::<actions::WorkflowGet>(&get).await?.typed.workflow;
            let request = rq::TaskList {
                workflow_id: workflow,
                step_id: None,
                query,
                include_archived: archived,
                limit: None,
                cursor: None,
            };
            let result = client.call::<actions::TaskList>(&request).await?;
            if args.json {
                print_json(&result.raw);
            } else {
                print_board(&board, &result.typed.tasks);
            }
        }
        TaskCommand::Move { id, step, position } => {
            let request = rq::TaskMove { id, step_id: step, position };
            let result = client.call::<actions::TaskMove>(&request).await?;
            if args.json {
                print_json(&result.raw);
            } else {
                println!("moved to position {}", result.typed.task.position);
            }
        }
    }
    Ok(())
}

/// Prints tasks grouped under their step names.
fn print_board(workflow: &WorkflowDto, tasks: &[TaskCardDto]) {
    for step in &workflow.steps {
        let in_step: Vec<&TaskCardDto> = tasks.iter().filter(|t| t.step_id == step.id).collect();
        println!("{} ({})", step.name, in_step.len());
        for task in in_step {
            println!("  {}  {}", task.id, task.title);
        }
    }
}

pub async fn workflow(args: ServerArgs, command: WorkflowCommand) -> Result<()> {
    let client = Client::new(&args);
    match command {
        WorkflowCommand::Export { ids, output } => {
            let result =
                client.call::<actions::WorkflowExport>(&rq::WorkflowExport { ids }).await?;
            let yaml = result.typed.yaml;
            match output {
                Some(path) => std::fs::write(&path, yaml)
                    .with_context(|| format!("cannot write {}", path.display()))?,
                None => print!("{yaml}"),
            }
        }
        WorkflowCommand::Import { workspace, file } => {
            let yaml = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let request = rq::WorkflowImport { workspace_id: workspace, yaml };
            let result = client.call::<actions::WorkflowImport>(&request).await?;
            if args.json {
                print_json(&result.raw);
            } else {
                for workflow in &result.typed.workflows {
                    println!("{}  {}", workflow.id, workflow.name);
                }
            }
        }
    }
    Ok(())
}
