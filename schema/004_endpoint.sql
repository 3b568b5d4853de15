-- SPDX-License-Identifier: MIT
-- Sessions whose Python runs on the operator's external Jupyter Server.
ALTER TABLE sessions ADD COLUMN endpoint INTEGER NOT NULL DEFAULT 0;
