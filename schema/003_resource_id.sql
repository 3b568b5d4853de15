-- SPDX-License-Identifier: MIT
-- A session taken from the warm pool keeps the name its sandbox was built under
-- (cgroup, workspace); NULL means the session id itself.
ALTER TABLE sessions ADD COLUMN rid TEXT;
