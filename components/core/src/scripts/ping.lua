-- The health check: Redis answers, and runs unread's scripts (every call is
-- one; a server that refuses EVAL would fail them all). Touches no key.
declare {}
return 1
