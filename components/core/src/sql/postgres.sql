-- unread's own table in a PostgreSQL message store: durable read cursors.
-- Applied by the core (idempotently) the first time an instance connects;
-- safe to run by hand.
CREATE TABLE IF NOT EXISTS unread_read_cursors (
  tenant TEXT NOT NULL,
  user_id TEXT NOT NULL,
  conversation TEXT NOT NULL,
  read_seq BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (tenant, user_id, conversation)
);
CREATE INDEX IF NOT EXISTS unread_read_cursors_by_conversation ON unread_read_cursors (tenant, conversation);
