-- SPDX-License-Identifier: MIT
-- Which API made a session, whether Python runs on the kernel tier, and its cell counter:
-- all needed to re-adopt a session after a daemon restart.
ALTER TABLE sessions ADD COLUMN plane TEXT NOT NULL DEFAULT 'otari';
ALTER TABLE sessions ADD COLUMN kernel INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN execution_count INTEGER NOT NULL DEFAULT 0;
