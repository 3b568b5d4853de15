/* SPDX-License-Identifier: MIT */
/* paddockctl: its context, and what its files offer each other (paddockctl.c runs the
 * commands; commands.c, runtime.c and doctor.c do them; client.c talks to the daemon). */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "config.h"

#define REPLY_TIMEOUT_S 30

/* The program's context: options and the configuration in force. */
typedef struct Ctl {
	const char *config_path;  /* --config, or the default file when readable, or NULL */
	const char *socket_path;  /* --socket, or NULL: <runtime_dir>/sessiond.sock */
	bool json;		  /* --json: print the daemon's replies as JSON */
	PaddockConfig cfg;	  /* settings: defaults, file, PADDOCK_* variables */
	char runtimes_error[512]; /* why the runtime profiles could not be read, or "" */
	char sock[PATH_MAX];	  /* the daemon's socket */
} Ctl;

/* client.c */
/*
 * Send req (not consumed) and read the reply into *ret (owned by the caller).
 * Returns 0 for a reply with "ok": true; -EREMOTEIO for an error reply (printed,
 * unless quiet, and still stored in *ret); -errno when the daemon cannot be reached.
 */
int ctl_call(const Ctl *c, json_object *req, bool quiet, json_object **ret);
/* {"op", "request_id", "session_id" (id not NULL)}. */
json_object *request(const char *op, const char *id);
void print_json(json_object *o);
/* Fields of the daemon's replies, or a default when absent or of another type. */
int64_t field_i64(json_object *o, const char *key);
double field_double(json_object *o, const char *key);
const char *field_str(json_object *o, const char *key, const char *def);
bool field_bool(json_object *o, const char *key);
/* 42s, 5m07s, 3h12m, 2d04h */
void fmt_duration(char *buf, size_t len, double seconds);
void fmt_bytes(char *buf, size_t len, int64_t bytes);

/* commands.c */
int cmd_list(const Ctl *c);
int cmd_show(const Ctl *c, const char *id);
int cmd_kill(const Ctl *c, const char *id);
int cmd_drain(const Ctl *c, bool on, bool wait, double timeout);
int cmd_stats(const Ctl *c);

/* runtime.c: the runtime profiles; args are the options after NAME */
int cmd_runtime_list(const Ctl *c);
int cmd_runtime_build(const Ctl *c, const char *name, int argc, char **argv);
int cmd_runtime_add(const Ctl *c, const char *name, int argc, char **argv);
int cmd_runtime_remove(const Ctl *c, const char *name);

/* doctor.c: every check, printed (or as JSON); 0 when none failed */
int cmd_doctor(const Ctl *c, const char *nginx_conf);
