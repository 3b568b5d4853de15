-- SPDX-License-Identifier: MIT
-- Sessions, their interpreters, the files their runs produced, and a log of executions.

CREATE TABLE sessions (
	id TEXT PRIMARY KEY,           -- <node>-<random>, URL-safe
	tenant TEXT,                   -- owner, NULL when tenancy is off
	uid INTEGER NOT NULL,          -- the sandbox's user id
	created_at REAL NOT NULL,      -- POSIX seconds
	last_activity_at REAL NOT NULL,
	idle_timeout INTEGER NOT NULL, -- seconds in force
	max_lifetime INTEGER NOT NULL, -- seconds in force
	image TEXT,                    -- the runtime profile asked for, if any
	init_pid INTEGER,              -- host pid of the sandbox's init
	init_ctl_fd INTEGER            -- where init keeps sessiond's end of its socket
);

CREATE TABLE interpreters (
	session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	kind TEXT NOT NULL,            -- python, bash, node
	ns_pid INTEGER NOT NULL,       -- pid inside the sandbox
	PRIMARY KEY (session_id, kind)
);

CREATE TABLE files (
	file_id TEXT PRIMARY KEY,      -- stable id handed to clients
	session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
	path TEXT NOT NULL,            -- workspace-relative
	UNIQUE (session_id, path)
);

CREATE TABLE executions (
	id INTEGER PRIMARY KEY,
	session_id TEXT NOT NULL,      -- kept after the session is gone
	tool TEXT NOT NULL,
	started_at REAL NOT NULL,
	duration_ms INTEGER NOT NULL,
	return_code INTEGER,
	outcome TEXT NOT NULL          -- ok, error, timeout, killed
);
CREATE INDEX executions_by_time ON executions(started_at);
