-- Identifiers were at most 64 bytes before they could be any 128: tables
-- made then are widened once (the core runs this only while a column is
-- narrower than 128; a metadata change, no copy of the rows).
ALTER TABLE unread_read_cursors MODIFY tenant VARBINARY(128) NOT NULL, MODIFY user_id VARBINARY(128) NOT NULL,
  MODIFY conversation VARBINARY(128) NOT NULL;
ALTER TABLE unread_recalls MODIFY tenant VARBINARY(128) NOT NULL, MODIFY conversation VARBINARY(128) NOT NULL;
ALTER TABLE unread_mentions MODIFY tenant VARBINARY(128) NOT NULL, MODIFY conversation VARBINARY(128) NOT NULL,
  MODIFY user_id VARBINARY(128) NOT NULL, MODIFY sender VARBINARY(128) NOT NULL;
ALTER TABLE unread_stale_users MODIFY tenant VARBINARY(128) NOT NULL, MODIFY user_id VARBINARY(128) NOT NULL;
