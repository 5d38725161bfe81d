-- Issue 21: optional accounts. With no row in `users` the server behaves as before; with
-- one, every request needs a login session, a personal API token or the server's --token.
-- Secrets are never stored: a password as its argon2id PHC string, a session and a token as
-- the SHA-256 of the random value the client holds. Plain SQL (no SQLite-only types) so the
-- same schema ports to PostgreSQL.
CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);

CREATE TABLE user_sessions (
    secret_hash TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
CREATE INDEX user_sessions_user ON user_sessions(user_id);

CREATE TABLE user_tokens (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at  BIGINT NOT NULL
);
CREATE INDEX user_tokens_user ON user_tokens(user_id);
