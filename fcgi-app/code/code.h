/* SPDX-License-Identifier: MIT */
/* The code-interpreter plane (/v1 and /v2 code, jupyter, nodejs, capabilities): its routes,
 * handlers and the parts they share. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "app.h"
#include "config.h"
#include "http/client.h"
#include "http/route.h"
#include "code/package_set.h"

/* The plane's route table (code.c): the handlers below. */
extern const RouteTable code_routes;

/* The account every session runs as; the only value `user` may name. */

/* ---- what the runtime offers (probe.c) ---- */

/* The layer that runs Python for the code routes. */
enum code_tier {
	CODE_TIER_NATIVE,   /* harness.py, stdlib only */
	CODE_TIER_KERNEL,   /* harness_kernel.py, IPython in the sandbox */
	CODE_TIER_ENDPOINT, /* harness_endpoint.py, a bridge to jupyter_endpoint's kernels */
};

/* One entry of the package set as the probe found it on the host, whose /usr the sandboxes
 * see. */
typedef struct CodePackage {
	const CodePackageSpec *spec; /* its line of packaging/package-set */
	bool found;		     /* the module is on python_bin's path / the command on PATH */
	char version[32];	     /* from its metadata or its --version; "" when unknown */
} CodePackage;

/* The probe's findings, computed once per worker process and read-only afterwards. */
typedef struct CodeRuntimes {
	bool python_ok;		  /* python_bin --version answered */
	char python_version[32];  /* "3.11.2", "" when missing */
	bool node_ok;		  /* node_bin --version answered */
	char node_version[32];	  /* "20.20.2", "" when missing */
	bool ipython_ok;	  /* python_bin can import IPython */
	char ipython_version[32]; /* IPython.__version__ */
	bool ipykernel_ok;	  /* python_bin can import ipykernel too */
	bool kernel_ok;		  /* the kernel tier can serve (IPython, not pinned native) */
	bool endpoint_ok;	  /* jupyter_endpoint answered the probe and serves Python */
	bool python_serves;	  /* Python runs on the tier in effect */
	enum code_tier tier;	  /* the Python tier in effect */
	char python_missing[512]; /* why Python cannot run, "" when it can */
	char node_missing[512];	  /* why JavaScript cannot run, "" when it can */
	char kernel_missing[512]; /* why there is no kernel tier, "" when there is */
	char warnings[3][384];	  /* settings we cannot honour, "" when unused */
	CodePackage *packages;	  /* code_package_set as found; NULL when out of memory */
	size_t n_packages;	  /* entries in packages */
} CodeRuntimes;

/* Start the probe in the background so the first request rarely waits for it. */
void code_probe_start(const PaddockConfig *cfg);
/* Wait for that probe to end: it reads the configuration, which the caller frees next. */
void code_probe_wait(void);

/* The probe's result; runs it first when it has not run yet (thread-safe). */
const CodeRuntimes *code_runtimes(const PaddockConfig *cfg);

/* "native", "kernel" or "endpoint". */
const char *code_tier_name(enum code_tier t);

/* ---- what the runtime offers, answered (info.c) ---- */

/* GET /v1|v2/code/info and GET /v1/capabilities. */
void code_info(ReqCtx *rq);
void code_capabilities(ReqCtx *rq);

/* ---- execute (execute.c) ---- */

/* POST /v2/code/execute, /v1/code/execute, /v1/nodejs/execute, /v1/jupyter/execute. */
void code_execute_v2(ReqCtx *rq);
void code_execute_v1(ReqCtx *rq);
void nodejs_execute(ReqCtx *rq);
void jupyter_execute(ReqCtx *rq);

/* ---- the envelope and shared request pieces (envelope.c) ---- */

/* {"success", "message", "data"} with status; data is taken (NULL: null). */
void code_reply(ReqCtx *rq, int status, bool success, const char *message, json_object *data);

/* A failure envelope with data null. */
void code_fail(ReqCtx *rq, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A 422 envelope with one entry in errors: location ["body", field] (field NULL: ["body"]). */
void code_invalid(ReqCtx *rq, const char *field, const char *type, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Answer a failed sessiond_call (r < 0) or a sessiond error reply in the envelope. */
void code_sd_fail(ReqCtx *rq, int r, const SessiondReply *rep);

/* Read a JSON object body; an empty one gives NULL when allow_empty. Answers itself on error. */
int code_read_body(ReqCtx *rq, bool allow_empty, json_object **ret);

/* A sessiond request for op, with request_id, tenant and session_id (NULL: none). */
json_object *code_sd_request(ReqCtx *rq, const char *op, const char *session_id);

/* Validate an optional session_id field; answers 422 and returns -1 when it is bad. */
int code_take_session_id(ReqCtx *rq, json_object *body, const char **ret);
/* The same for image (a runtime profile's name, a hint: an unknown one runs the default):
 * a string of at most CODE_IMAGE_MAX bytes, or absent or null (*ret NULL). */
#define CODE_IMAGE_MAX 255
int code_take_image(ReqCtx *rq, json_object *body, const char **ret);
/* Put image into a sessiond create request (nothing when NULL); -1 without memory. */
int code_request_image(json_object *req, const char *image);

/*
 * Validate an optional cwd (a directory under /workspace) against a session; 0 when
 * fine, -1 after answering 422 (or the daemon's failure).
 */
int code_check_cwd(ReqCtx *rq, const char *session_id, const char *cwd);

/* ---- sessions (sessions.c) ---- */

void code_session_create(ReqCtx *rq);
void code_session_list(ReqCtx *rq);
void code_session_get(ReqCtx *rq);
void code_session_delete(ReqCtx *rq);
void jupyter_session_list(ReqCtx *rq);
void jupyter_session_create(ReqCtx *rq);
void jupyter_session_delete(ReqCtx *rq);
void jupyter_session_delete_all(ReqCtx *rq);

/* ---- notebook outputs (outputs.c) ---- */

/* What one cell produced, shaped from sessiond's exec reply. Strings are owned. */
typedef struct CellOutcome {
	char *stdout_text;	 /* the stdout streams joined (may hold NUL bytes) */
	size_t stdout_len;	 /* its length in bytes */
	char *stderr_text;	 /* the stderr streams joined: output, notes, timeout sentence */
	size_t stderr_len;	 /* its length in bytes */
	const char *status;	 /* "ok", "error", "timeout" (static) */
	int exit_code;		 /* 0 ok, 1 otherwise */
	int64_t execution_count; /* the session's cell counter, -1 when nothing ran */
	json_object *outputs;	 /* the notebook output list, the keys each type uses */
	json_object *traceback;	 /* the error's traceback lines, or NULL */
} CellOutcome;

/* Shape rep (an exec reply) for a run with timeout_s; -ENOMEM. */
int cell_outcome_build(const PaddockConfig *cfg, json_object *rep, int64_t timeout_s,
		       CellOutcome *out);
void cell_outcome_clear(CellOutcome *o);

/* A ProcessError cell: nothing ran (e.g. a user this daemon cannot become). */
int cell_outcome_process_error(const char *why, CellOutcome *out);

/*
 * The outputs list for a surface: only the keys a type uses, or (all_keys) every one of the
 * nine keys of the 1.x JupyterOutput model with null where unused. A new reference.
 */
json_object *cell_outputs_render(const CellOutcome *o, bool all_keys);

/* One output as it streams, in the shape cell_outputs_render gives it: a stream's text (valid
 * UTF-8), or a rich output from the harness's event ({"data", "metadata"}; NULL without
 * data). New references; NULL also when out of memory. */
json_object *cell_stream_output(const char *name, const char *text, size_t len, bool all_keys);
json_object *cell_display_output(json_object *event, bool all_keys);

/* ---- a cell streamed as events (stream.c) ---- */

/*
 * Run req (an exec) with its outputs sent as they come as events named by their type
 * (stream, display_data), under the cell's character cap. 0 with an ok reply in *rep (the
 * stream has begun); -1 when answered (an error before the run started) or when the client
 * went away (nothing to answer). *rep is cleared on -1.
 */
int code_run_streamed(ReqCtx *rq, json_object *req, bool all_keys, SessiondReply *rep);
/* The outputs known only at the end (execute_result, error) as events, before the result. */
int code_stream_final(ReqCtx *rq, const CellOutcome *o, bool all_keys);
