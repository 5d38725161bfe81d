//! `kandev db copy`: moves a database to another engine or place (a laptop's SQLite file to
//! a team's PostgreSQL), verifying each table's row count.

use anyhow::{Context, Result};
use clap::Subcommand;
use kandev_store::Location;

#[derive(Subcommand, Debug)]
pub enum DbCommand {
    /// Copy every row of one database into another, empty one, and check the row counts.
    /// A server may run on the source meanwhile: it is read as it was at one moment. Example:
    /// kandev db copy --from ~/.kandev/kandev.db --to postgres://kandev@db.example/kandev
    Copy {
        /// The database to read: a SQLite file path, sqlite:// or postgres:// URL.
        #[arg(long)]
        from: String,
        /// The empty database to fill: a SQLite file path, sqlite:// or postgres:// URL
        /// (a PostgreSQL database must exist; its tables are created).
        #[arg(long)]
        to: String,
    },
}

pub async fn run(command: DbCommand) -> Result<()> {
    match command {
        DbCommand::Copy { from, to } => {
            let source = Location::parse(&from)?;
            if let Location::File(path) = &source
                && !path.exists()
            {
                anyhow::bail!("{} does not exist; give the database to copy", path.display());
            }
            let target = Location::parse(&to)?;
            let copied = kandev_store::copy_database(source, target)
                .await
                .context("the copy failed; nothing was written to the destination")?;
            let total: u64 = copied.iter().map(|t| t.rows).sum();
            for table in copied.iter().filter(|t| t.rows > 0) {
                println!("{:>10}  {}", table.rows, table.table);
            }
            println!("copied {total} rows; every table's row count matches the source");
            Ok(())
        }
    }
}
