-- A worked example: a small chat app's own tables on MySQL / MariaDB, and
-- the two read-only views unread reads from them. tests/api/schema.rs builds
-- exactly this file and runs unread's truth, reconcile and SQL answers over
-- it, so it stays right. Adapt the tables; keep the views' column names and
-- types.

-- The app's conversations. last_seq is the newest message's seq, kept by the
-- app in the same transaction as the message's INSERT (0: no message yet).
CREATE TABLE app_conversations (
  tenant VARCHAR(128) NOT NULL,
  conversation VARCHAR(128) NOT NULL,
  category VARCHAR(32) NOT NULL DEFAULT 'chat',
  last_seq BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant, conversation)
);

CREATE TABLE app_members (
  tenant VARCHAR(128) NOT NULL,
  conversation VARCHAR(128) NOT NULL,
  user_id VARCHAR(128) NOT NULL,
  PRIMARY KEY (tenant, conversation, user_id)
);

-- Messages: seq counts from 1 in each conversation; a recall sets
-- recalled_at and keeps the row. DATETIME(3) holds UTC.
CREATE TABLE app_messages (
  tenant VARCHAR(128) NOT NULL,
  conversation VARCHAR(128) NOT NULL,
  seq BIGINT NOT NULL,
  sender VARCHAR(128) NOT NULL,
  sent_at DATETIME(3) NOT NULL,
  body JSON NOT NULL,
  recalled_at DATETIME(3) NULL,
  PRIMARY KEY (tenant, conversation, seq)
);

-- One row per conversation with a message: its newest message.
--   last_seq BIGINT NOT NULL   the newest message's seq
--   last_ts  BIGINT NOT NULL   its time in milliseconds since the epoch (a
--                              DATETIME column in UTC converts as below)
--   category VARCHAR           as in touch; NULL reads as 'chat'
--   last_sender VARCHAR        (optional) who sent the newest message: it
--                              never counts as unread for them, even when
--                              its touch never came
--   preview  JSON object       (JSON or text) what the list shows; a
--                              recalled message shows the recall, so that
--                              no rebuild brings the recalled text back
CREATE VIEW unread_conversation_heads AS
  SELECT c.tenant, c.conversation, c.last_seq,
         CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', m.sent_at) DIV 1000 AS SIGNED) AS last_ts,
         c.category,
         m.sender AS last_sender,
         CASE WHEN m.recalled_at IS NULL THEN m.body
              ELSE JSON_OBJECT('type', 'recalled') END AS preview
  FROM app_conversations c
  JOIN app_messages m
    ON m.tenant = c.tenant AND m.conversation = c.conversation AND m.seq = c.last_seq;

-- Who sees which conversation: one row per member of a conversation (the truth
-- counts each row it finds).
CREATE VIEW unread_memberships AS
  SELECT tenant, conversation, user_id FROM app_members;
