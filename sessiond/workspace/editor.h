/* SPDX-License-Identifier: MIT */
/* The text_editor_code_execution tool: view, create, str_replace, insert, undo_edit. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

struct json_object;

/* Undo history of one session: per file, a stack of earlier contents. Opaque. */
typedef struct EditorUndo EditorUndo;

EditorUndo *editor_undo_new(void);
EditorUndo *editor_undo_free(EditorUndo *u);

/* The outcome, shaped like a program's: stdout, stderr, return_code. Owned strings. */
typedef struct EditorResult {
	char *out;	 /* stdout: message on success, "" on failure */
	char *err;	 /* stderr: "" on success, "text_editor: <message>\n" on failure */
	int return_code; /* 0 or 1 */
} EditorResult;

/*
 * Validate input (command, path, command fields) and run it on the workspace.
 * Returns -EINVAL with *detail set (static string) when a field the command needs
 * is missing or of the wrong type: the caller answers 422. Otherwise 0 and res
 * filled (a failed edit is return_code 1, not an error).
 */
int editor_run(int ws_fd, uid_t uid, gid_t gid, size_t max_bytes, EditorUndo *undo,
	       struct json_object *input, EditorResult *res, const char **detail);
void editor_result_clear(EditorResult *res);
