-- unread's own tables in a PostgreSQL message store. Applied by the core
-- (idempotently) the first time an instance connects; safe to run by hand.

-- Each user's read cursor and settings of a conversation.
CREATE TABLE IF NOT EXISTS unread_read_cursors (
  tenant TEXT NOT NULL,
  user_id TEXT NOT NULL,
  conversation TEXT NOT NULL,
  read_seq BIGINT NOT NULL DEFAULT 0,
  muted SMALLINT NOT NULL DEFAULT 0,
  pinned SMALLINT NOT NULL DEFAULT 0,
  marked_unread SMALLINT NOT NULL DEFAULT 0,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (tenant, user_id, conversation)
);
CREATE INDEX IF NOT EXISTS unread_read_cursors_by_conversation ON unread_read_cursors (tenant, conversation);

-- Recalled (or deleted) messages: they never count as unread.
CREATE TABLE IF NOT EXISTS unread_recalls (
  tenant TEXT NOT NULL,
  conversation TEXT NOT NULL,
  seq BIGINT NOT NULL,
  PRIMARY KEY (tenant, conversation, seq)
);

-- Mentions: user_id '*' mentions every member but the sender (no
-- identifier may be `*` alone).
CREATE TABLE IF NOT EXISTS unread_mentions (
  tenant TEXT NOT NULL,
  conversation TEXT NOT NULL,
  seq BIGINT NOT NULL,
  user_id TEXT NOT NULL,
  sender TEXT NOT NULL,
  PRIMARY KEY (tenant, conversation, seq, user_id)
);

-- Users whose write reached this store while Redis was unreachable: the
-- next Redis connection makes their next read rebuild from the truth.
CREATE TABLE IF NOT EXISTS unread_stale_users (
  tenant TEXT NOT NULL,
  user_id TEXT NOT NULL,
  since BIGINT NOT NULL,
  PRIMARY KEY (tenant, user_id, since)
);

-- Large conversations (read diffusion): a touch named more members than
-- large_group_threshold. Written before Redis makes it large, so that a
-- Redis that lost its data makes it large again, and users rebuilt from the
-- truth catch up with it.
CREATE TABLE IF NOT EXISTS unread_large_conversations (
  tenant TEXT NOT NULL,
  conversation TEXT NOT NULL,
  PRIMARY KEY (tenant, conversation)
);
