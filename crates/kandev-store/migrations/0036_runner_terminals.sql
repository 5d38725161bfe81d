-- Issue 45 item 13: user terminals and dev servers run on the local runner and survive a
-- restart of the server, like agents. Each is recorded while it runs: its id as the API shows
-- it, its task and repository, what it is (`terminal` or `dev_server`, with its port), and its
-- execution's name on the runner, so the next start takes it over again (its scrollback
-- replayed) or forgets the row when the runner no longer holds it.
CREATE TABLE runner_terminals (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    repository_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    exec TEXT NOT NULL,
    port INTEGER,
    started_at INTEGER NOT NULL
);
