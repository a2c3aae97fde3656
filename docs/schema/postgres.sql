-- A worked example: a small chat app's own tables on PostgreSQL, and the
-- two read-only views unread reads from them. tests/api/schema.rs builds
-- exactly this file and runs unread's truth, reconcile and SQL answers over
-- it, so it stays right. Adapt the tables; keep the views' column names and
-- types.

-- The app's conversations. last_seq is the newest message's seq, kept by the
-- app in the same transaction as the message's INSERT (0: no message yet).
CREATE TABLE app_conversations (
  tenant TEXT NOT NULL,
  conversation TEXT NOT NULL,
  category TEXT NOT NULL DEFAULT 'chat',
  last_seq BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant, conversation)
);

CREATE TABLE app_members (
  tenant TEXT NOT NULL,
  conversation TEXT NOT NULL,
  user_id TEXT NOT NULL,
  PRIMARY KEY (tenant, conversation, user_id)
);

-- Messages: seq counts from 1 in each conversation; a recall sets
-- recalled_at and keeps the row.
CREATE TABLE app_messages (
  tenant TEXT NOT NULL,
  conversation TEXT NOT NULL,
  seq BIGINT NOT NULL,
  sender TEXT NOT NULL,
  sent_at TIMESTAMPTZ NOT NULL,
  body JSONB NOT NULL,
  recalled_at TIMESTAMPTZ,
  PRIMARY KEY (tenant, conversation, seq)
);

-- One row per conversation with a message: its newest message.
--   last_seq BIGINT NOT NULL   the newest message's seq
--   last_ts  BIGINT NOT NULL   its time in milliseconds since the epoch (a
--                              TIMESTAMPTZ column converts as below,
--                              microseconds dropped, as in touch's ts)
--   category TEXT              as in touch; NULL reads as 'chat'
--   last_sender TEXT           (optional) who sent the newest message: it
--                              never counts as unread for them, even when
--                              its touch never came
--   preview  JSON object       (JSONB, JSON or text) what the list shows; a
--                              recalled message shows the recall, so that
--                              no rebuild brings the recalled text back
CREATE VIEW unread_conversation_heads AS
  SELECT c.tenant, c.conversation, c.last_seq,
         FLOOR(EXTRACT(EPOCH FROM m.sent_at) * 1000)::BIGINT AS last_ts,
         c.category,
         m.sender AS last_sender,
         CASE WHEN m.recalled_at IS NULL THEN m.body
              ELSE jsonb_build_object('type', 'recalled') END AS preview
  FROM app_conversations c
  JOIN app_messages m
    ON m.tenant = c.tenant AND m.conversation = c.conversation AND m.seq = c.last_seq;

-- Who sees which conversation: one row per member of a conversation (the truth
-- counts each row it finds).
CREATE VIEW unread_memberships AS
  SELECT tenant, conversation, user_id FROM app_members;
