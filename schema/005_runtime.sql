-- SPDX-License-Identifier: MIT
-- The runtime profile a session's sandbox was built on; NULL: the host's own /usr.
ALTER TABLE sessions ADD COLUMN runtime TEXT;
