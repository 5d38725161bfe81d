//! The CLI's client side: task and workflow commands sent to a running server over HTTP.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

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

impl Client {
    fn new(args: &ServerArgs) -> Client {
        Client {
            http: reqwest::Client::new(),
            base: args.server.trim_end_matches('/').to_owned(),
            token: args.token.clone(),
        }
    }

    async fn call(&self, action: &str, payload: Value) -> Result<Value> {
        let mut request = self.http.post(format!("{}/api/v1/{action}", self.base)).json(&payload);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.with_context(|| {
            format!("cannot reach the server at {}; is `kandev serve` running?", self.base)
        })?;
        let ok = response.status().is_success();
        let body: Value =
            response.json().await.context("the server sent an answer that is not JSON")?;
        if !ok {
            let message = body["message"].as_str().unwrap_or("request failed");
            let code = body["code"].as_str().unwrap_or("ERROR");
            let mut text = format!("{message} ({code})");
            for problem in body["details"]["problems"].as_array().into_iter().flatten() {
                let path = problem["path"].as_str().unwrap_or("?");
                text.push_str(&format!(
                    "\n  {path}: {}",
                    problem["message"].as_str().unwrap_or("")
                ));
            }
            bail!(text);
        }
        Ok(body)
    }
}

fn print_json(value: &Value) {
    println!("{}", serde_json::to_string_pretty(value).unwrap_or_default());
}

pub async fn task(args: ServerArgs, command: TaskCommand) -> Result<()> {
    let client = Client::new(&args);
    match command {
        TaskCommand::Create { workflow, title, description, step, repositories, profile } => {
            let payload = json!({
                "workflow_id": workflow, "title": title, "description": description,
                "step_id": step, "repository_ids": repositories, "agent_profile_id": profile,
            });
            let result = client.call("task.create", payload).await?;
            if args.json {
                print_json(&result);
            } else {
                println!("{}", result["task"]["id"].as_str().unwrap_or_default());
            }
        }
        TaskCommand::List { workflow, query, archived } => {
            let board = client.call("workflow.get", json!({ "id": workflow })).await?;
            let payload =
                json!({ "workflow_id": workflow, "query": query, "include_archived": archived });
            let result = client.call("task.list", payload).await?;
            if args.json {
                print_json(&result);
            } else {
                print_board(&board["workflow"], &result["tasks"]);
            }
        }
        TaskCommand::Move { id, step, position } => {
            let result = client
                .call("task.move", json!({ "id": id, "step_id": step, "position": position }))
                .await?;
            if args.json {
                print_json(&result);
            } else {
                println!("moved to position {}", result["task"]["position"]);
            }
        }
    }
    Ok(())
}

/// Prints tasks grouped under their step names.
fn print_board(workflow: &Value, tasks: &Value) {
    let empty = vec![];
    let tasks = tasks.as_array().unwrap_or(&empty);
    for step in workflow["steps"].as_array().unwrap_or(&empty) {
        let in_step: Vec<&Value> = tasks.iter().filter(|t| t["step_id"] == step["id"]).collect();
        println!("{} ({})", step["name"].as_str().unwrap_or("?"), in_step.len());
        for task in in_step {
            println!(
                "  {}  {}",
                task["id"].as_str().unwrap_or("?"),
                task["title"].as_str().unwrap_or("")
            );
        }
    }
}

pub async fn workflow(args: ServerArgs, command: WorkflowCommand) -> Result<()> {
    let client = Client::new(&args);
    match command {
        WorkflowCommand::Export { ids, output } => {
            let result = client.call("workflow.export", json!({ "ids": ids })).await?;
            let yaml = result["yaml"].as_str().unwrap_or_default();
            match output {
                Some(path) => std::fs::write(&path, yaml)
                    .with_context(|| format!("cannot write {}", path.display()))?,
                None => print!("{yaml}"),
            }
        }
        WorkflowCommand::Import { workspace, file } => {
            let yaml = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let result = client
                .call("workflow.import", json!({ "workspace_id": workspace, "yaml": yaml }))
                .await?;
            if args.json {
                print_json(&result);
            } else {
                for workflow in result["workflows"].as_array().unwrap_or(&vec![]) {
                    println!(
                        "{}  {}",
                        workflow["id"].as_str().unwrap_or("?"),
                        workflow["name"].as_str().unwrap_or("")
                    );
                }
            }
        }
    }
    Ok(())
}
