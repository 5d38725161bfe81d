-- Issue 18 (notifications): a durable record of each event that needs a person, with the seq
-- of the event that announced it; channels (webhook, ntfy) that carry chosen kinds out; and
-- the delivery of each record to each channel with every attempt (the delivery log).

CREATE TABLE notifications (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    task_id     TEXT NOT NULL,
    session_id  TEXT NOT NULL,
    title       TEXT NOT NULL,
    data        TEXT NOT NULL DEFAULT '{}',
    created_at  INTEGER NOT NULL
);
CREATE INDEX notifications_by_seq ON notifications(seq);

-- `events`: JSON array of notification kinds. `url` and `secret` are secrets.
CREATE TABLE notification_channels (
    id          TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    url         TEXT NOT NULL,
    secret      TEXT,
    events      TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);

CREATE TABLE notification_deliveries (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    notification_id  TEXT NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
    channel_id       TEXT NOT NULL REFERENCES notification_channels(id) ON DELETE CASCADE,
    status           TEXT NOT NULL,
    next_at          INTEGER,
    UNIQUE (notification_id, channel_id)
);
CREATE INDEX notification_deliveries_due ON notification_deliveries(status, next_at);

CREATE TABLE notification_attempts (
    delivery_id  INTEGER NOT NULL REFERENCES notification_deliveries(id) ON DELETE CASCADE,
    attempt      INTEGER NOT NULL,
    at           INTEGER NOT NULL,
    http_status  INTEGER,
    error        TEXT,
    PRIMARY KEY (delivery_id, attempt)
);
