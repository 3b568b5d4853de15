-- SPDX-License-Identifier: MIT
-- A session's programmatic tools as registered (callback_url, token, tools, timeout_seconds),
-- JSON; NULL: none. The token is kept here, on the host, for a restarted daemon.
ALTER TABLE sessions ADD COLUMN tools TEXT;
