//! `kandev user`: adds, lists and removes the users who may log in (issue 21), and sets their
//! passwords, on the database directly (the server may be running: the store takes turns).
//! A password is read from the terminal without echo, asked twice, or as one line from
//! standard input when that is not a terminal; never from the command line.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use kandev_domain::account;

use crate::serve::{home_or_default, secure_home};

/// Where the database is (the same flags as `kandev serve`).
#[derive(Args, Debug)]
pub struct DatabaseArgs {
    /// Data directory (database, worktrees). Default: ~/.kandev
    #[arg(long, env = "KANDEV_HOME", global = true)]
    home: Option<PathBuf>,
    /// Database to use instead of <home>/kandev.db: a SQLite file path, sqlite:// or
    /// postgres:// URL.
    #[arg(long, env = "KANDEV_DATABASE_URL", global = true)]
    database_url: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum UserCommand {
    /// Add a user; the password is asked for (or read as one line from standard input).
    /// Once a user exists, every request needs a login or a token.
    Add {
        name: String,
        /// No password: the user signs in only through the trusted proxy
        /// (`serve --proxy-user-header`) or with personal tokens.
        #[arg(long)]
        no_password: bool,
    },
    /// List the users.
    List,
    /// Remove a user with their login sessions and tokens. The last user is kept unless
    /// --force: with no user left a loopback server is open again to whoever reaches it, and a
    /// server on another address without --token refuses every request until a user is added.
    Remove {
        name: String,
        /// Remove the last user too.
        #[arg(long)]
        force: bool,
    },
    /// Set a user's password; their login sessions end (their tokens stay).
    Passwd { name: String },
    /// Make NAME the server's owner (and nobody else): the owner passes every role check and
    /// manages users. The first user added is the owner.
    Owner { name: String },
    /// A user's personal API tokens (for scripts: `Authorization: Bearer kdv_…`).
    #[command(subcommand)]
    Token(TokenCommand),
}

#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// Create a personal token of USER labelled NAME (where it is used); the secret is printed
    /// this once and stored only as its SHA-256.
    Create { user: String, name: String },
    /// List USER's tokens (never their secrets).
    List { user: String },
    /// Revoke USER's token ID: it is refused from the next request on.
    Revoke { user: String, id: String },
}

pub async fn run(db: DatabaseArgs, command: UserCommand) -> Result<()> {
    let home = home_or_default(db.home.as_ref())?;
    secure_home(&home)?;
    let location = crate::serve::database_location(&home, db.database_url.as_deref())?;
    // Beside a running server: the one-server locks (the home's, the database's,
    // PostgreSQL's) are the server's.
    let store = kandev_store::Store::open_beside_server(location)
        .await
        .context("cannot open the database")?;
    let result = match command {
        UserCommand::Add { name, no_password } => {
            let name = account::user_name(&name).map_err(|e| anyhow::anyhow!("{e}"))?;
            // An empty hash: no password ever verifies against it.
            let hash = if no_password { String::new() } else { new_password_hash()? };
            let mut tx = store.begin_write().await?;
            let user = tx.insert_user(&name, &hash).await?;
            tx.commit().await?;
            if user.owner {
                println!("added user {name}, the server's owner; they can log in at /login");
            } else {
                println!(
                    "added user {name}; they can log in at /login, and see a workspace once an \
                     admin of it adds them (Settings → Members)"
                );
            }
            Ok(())
        }
        UserCommand::List => {
            for user in store.list_users().await? {
                let owner = if user.owner { "\towner" } else { "" };
                println!("{}\t{}{owner}", user.name, kandev_api_types::rfc3339(user.created_at));
            }
            Ok(())
        }
        UserCommand::Remove { name, force } => {
            let users = store.list_users().await?;
            let last = users.len() == 1 && users.iter().any(|u| u.name == name.trim());
            if !last && users.iter().any(|u| u.owner && u.name == name.trim()) {
                store.close().await;
                bail!(
                    "{} owns this server: make another user the owner first (`kandev user owner \
                     <name>`)",
                    name.trim()
                );
            }
            if last && !force {
                store.close().await;
                bail!(
                    "{} is the last user: without users a server on loopback asks for no login \
                     and one on another address refuses every request; add another user first, \
                     or pass --force",
                    name.trim()
                );
            }
            let mut tx = store.begin_write().await?;
            tx.delete_user(name.trim()).await?;
            tx.commit().await?;
            println!("removed user {}", name.trim());
            if !store.has_users().await? {
                println!(
                    "no user is left: on loopback the server no longer asks for a login; on \
                     another address without --token it refuses requests until `kandev user add`"
                );
            }
            Ok(())
        }
        UserCommand::Passwd { name } => {
            let hash = new_password_hash()?;
            let mut tx = store.begin_write().await?;
            tx.set_password(name.trim(), &hash, None).await?;
            tx.commit().await?;
            println!("changed the password of {}; their login sessions ended", name.trim());
            Ok(())
        }
        UserCommand::Owner { name } => {
            let mut tx = store.begin_write().await?;
            tx.set_owner(name.trim()).await?;
            tx.commit().await?;
            println!("{} now owns this server", name.trim());
            Ok(())
        }
        UserCommand::Token(command) => token(&store, command).await,
    };
    store.close().await;
    result
}

async fn token(store: &kandev_store::Store, command: TokenCommand) -> Result<()> {
    let user = |name: &str| {
        let name = name.trim().to_owned();
        async move {
            match store.user_credentials(&name).await? {
                Some((user, _)) => Ok(user),
                None => bail!("no user is named {name}; see `kandev user list`"),
            }
        }
    };
    match command {
        TokenCommand::Create { user: owner, name } => {
            let owner = user(&owner).await?;
            let name =
                kandev_domain::validate::name("name", &name).map_err(|e| anyhow::anyhow!("{e}"))?;
            let secret = kandev_server::new_secret(kandev_server::TOKEN_PREFIX);
            let mut tx = store.begin_write().await?;
            let token =
                tx.insert_token(&owner.id, &name, &kandev_server::secret_hash(&secret)).await?;
            tx.commit().await?;
            eprintln!(
                "created token {} ({}) of {}; it is shown this once, keep it now:",
                token.id, token.name, owner.name
            );
            println!("{secret}");
        }
        TokenCommand::List { user: owner } => {
            let owner = user(&owner).await?;
            for token in store.list_tokens(&owner.id).await? {
                let created = kandev_api_types::rfc3339(token.created_at);
                println!("{}\t{}\t{created}", token.id, token.name);
            }
        }
        TokenCommand::Revoke { user: owner, id } => {
            let owner = user(&owner).await?;
            let mut tx = store.begin_write().await?;
            tx.delete_token(&owner.id, id.trim())
                .await
                .with_context(|| format!("cannot revoke token {} of {}", id.trim(), owner.name))?;
            tx.commit().await?;
            println!("revoked token {} of {}", id.trim(), owner.name);
        }
    }
    Ok(())
}

/// Reads a new password (twice on a terminal), checks it and hashes it with argon2id.
fn new_password_hash() -> Result<String> {
    let password = if std::io::stdin().is_terminal() {
        let first = prompt_hidden("Password: ")?;
        let again = prompt_hidden("Password again: ")?;
        if first != again {
            bail!("the two passwords differ; nothing was changed");
        }
        first
    } else {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).context("cannot read the password")?;
        line.trim_end_matches(['\n', '\r']).to_owned()
    };
    account::password(&password).map_err(|e| anyhow::anyhow!("{e}"))?;
    kandev_server::hash_password(&password).map_err(anyhow::Error::msg)
}

/// Asks on the terminal with echo off, and turns echo back on whatever happens.
fn prompt_hidden(prompt: &str) -> Result<String> {
    use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
    let stdin = std::io::stdin();
    eprint!("{prompt}");
    std::io::stderr().flush().ok();
    let saved = tcgetattr(&stdin).context("cannot read the terminal's settings")?;
    let mut quiet = saved.clone();
    quiet.local_flags.remove(LocalFlags::ECHO);
    tcsetattr(&stdin, SetArg::TCSANOW, &quiet).context("cannot turn the terminal's echo off")?;
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    let restored = tcsetattr(&stdin, SetArg::TCSANOW, &saved);
    eprintln!();
    read.context("cannot read the password")?;
    restored.context("cannot turn the terminal's echo back on")?;
    Ok(line.trim_end_matches(['\n', '\r']).to_owned())
}
