-- unread's own table in a MySQL / MariaDB message store: durable read cursors.
-- Applied by the core (idempotently) the first time an instance connects;
-- safe to run by hand. Identifiers are binary: compared byte for byte, and
-- joinable with the app's views whatever their collation.
CREATE TABLE IF NOT EXISTS unread_read_cursors (
  tenant VARBINARY(64) NOT NULL,
  user_id VARBINARY(64) NOT NULL,
  conversation VARBINARY(64) NOT NULL,
  read_seq BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (tenant, user_id, conversation),
  KEY unread_read_cursors_by_conversation (tenant, conversation)
);
