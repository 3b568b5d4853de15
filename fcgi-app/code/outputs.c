/* SPDX-License-Identifier: MIT */
/* Notebook outputs of one cell, built from sessiond's exec reply, and their per-surface shapes. */
#include "code.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "json.h"

/* A growable byte string (NUL bytes allowed), NUL-terminated for convenience. */
struct text {
	char *s;    /* owned */
	size_t len; /* bytes in s */
};

static int text_add(struct text *t, const char *add, size_t n)
{
	char *grown = realloc(t->s, t->len + n + 1);

	if (!grown)
		return -ENOMEM;
	memcpy(grown + t->len, add, n);
	t->s = grown;
	t->len += n;
	t->s[t->len] = '\0';
	return 0;
}

/* The last non-empty line of s, copied into buf. */
static void last_line(const char *s, size_t len, char *buf, size_t buflen)
{
	size_t end = len, start;

	while (end > 0 && s[end - 1] == '\n')
		end--;
	start = end;
	while (start > 0 && s[start - 1] != '\n')
		start--;
	snprintf(buf, buflen, "%.*s", (int)(end - start), s + start);
}

static json_object *all_keys_output(json_object *src);

static json_object *stream_output(const char *name, const char *text, size_t len)
{
	json_object *o = json_object_new_object();

	if (!o || json_set(o, "output_type", json_object_new_string("stream")) < 0 ||
	    json_set(o, "name", json_object_new_string(name)) < 0 ||
	    json_set(o, "text", json_object_new_string_len(text, (int)len)) < 0) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static json_object *error_output(const char *ename, const char *evalue, json_object *traceback)
{
	json_object *o = json_object_new_object();

	if (!o || json_set(o, "output_type", json_object_new_string("error")) < 0 ||
	    json_set(o, "ename", json_object_new_string(ename)) < 0 ||
	    json_set(o, "evalue", json_object_new_string(evalue)) < 0 ||
	    json_set(o, "traceback", traceback) < 0) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* A traceback of one line, "<ename>: <evalue>". */
static json_object *one_line_traceback(const char *ename, const char *evalue)
{
	json_object *a = json_object_new_array();
	_cleanup_free_ char *line = NULL;

	if (!a || asprintf(&line, "%s: %s", ename, evalue) < 0 ||
	    json_object_array_add(a, json_object_new_string(line)) < 0) {
		json_object_put(a);
		return NULL;
	}
	return a;
}

/* The harness's error object as an error output; only strings and string lists pass. */
static json_object *harness_error_output(json_object *err)
{
	const char *ename = "Error", *evalue = "";
	json_object *tb, *lines = json_object_new_array();

	if (!lines)
		return NULL;
	json_in_string(err, "ename", &ename, NULL);
	json_in_string(err, "evalue", &evalue, NULL);
	if (json_object_object_get_ex(err, "traceback", &tb) &&
	    json_object_is_type(tb, json_type_array))
		for (size_t i = 0; i < json_object_array_length(tb); i++) {
			json_object *l = json_object_array_get_idx(tb, i);

			if (json_object_is_type(l, json_type_string) &&
			    json_object_array_add(lines, json_object_get(l)) < 0) {
				json_object_put(lines);
				return NULL;
			}
		}
	return error_output(ename, evalue, lines);
}

static json_object *display_output(const char *type, json_object *data, json_object *metadata,
				   int64_t count)
{
	json_object *o = json_object_new_object();

	if (!o || json_set(o, "output_type", json_object_new_string(type)) < 0 ||
	    json_set(o, "data", json_object_get(data)) < 0 ||
	    json_set(o, "metadata",
		     metadata ? json_object_get(metadata) : json_object_new_object()) < 0 ||
	    (count >= 0 && json_set(o, "execution_count", json_object_new_int64(count)) < 0)) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static int add_output(json_object *outputs, json_object *o)
{
	if (!o)
		return -ENOMEM;
	if (json_object_array_add(outputs, o) < 0) {
		json_object_put(o);
		return -ENOMEM;
	}
	return 0;
}

/* display_data items the kernel tier reports: [{"data": {...}, "metadata": {...}}]. */
static int add_displays(json_object *outputs, json_object *display)
{
	if (!json_object_is_type(display, json_type_array))
		return 0;
	for (size_t i = 0; i < json_object_array_length(display); i++) {
		json_object *d = json_object_array_get_idx(display, i), *data, *meta = NULL;
		int r;

		if (json_in_object(d, "data", &data) <= 0)
			continue;
		if (json_in_object(d, "metadata", &meta) <= 0)
			meta = NULL;
		r = add_output(outputs, display_output("display_data", data, meta, -1));
		if (r < 0)
			return r;
	}
	return 0;
}

/* Everything the reply says about the run, read once. */
struct exec_view {
	const char *out, *err; /* stdout, stderr */
	size_t out_len, err_len;
	bool timed_out, state_lost;
	int64_t return_code, count;
	json_object *result, *error, *display; /* borrowed, or NULL */
};

static void exec_view_read(json_object *rep, struct exec_view *v)
{
	json_object *b;

	*v = (struct exec_view){ .out = "", .err = "", .return_code = 1, .count = -1 };
	if (json_in_string(rep, "stdout", &v->out, &v->out_len) <= 0)
		v->out = "", v->out_len = 0;
	if (json_in_string(rep, "stderr", &v->err, &v->err_len) <= 0)
		v->err = "", v->err_len = 0;
	v->timed_out =
		json_object_object_get_ex(rep, "timed_out", &b) && json_object_get_boolean(b);
	v->state_lost =
		json_object_object_get_ex(rep, "state_lost", &b) && json_object_get_boolean(b);
	json_in_int(rep, "return_code", &v->return_code);
	json_in_int(rep, "execution_count", &v->count);
	if (json_in_object(rep, "result", &v->result) <= 0)
		v->result = NULL;
	if (json_in_object(rep, "error", &v->error) <= 0)
		v->error = NULL;
	if (!json_object_object_get_ex(rep, "display", &v->display))
		v->display = NULL;
}

/* The streams, under the per-cell cap, into outputs and the joined texts. */
static int add_streams(const PaddockConfig *cfg, const struct exec_view *v, CellOutcome *o)
{
	size_t budget = (size_t)cfg->code_output_max_chars, n_out, n_err;
	size_t err_len = v->err_len; /* in cell mode the daemon keeps its notes out of stderr */
	size_t keep_out = utf8_chars_prefix(v->out, v->out_len, budget, &n_out);
	size_t keep_err = utf8_chars_prefix(v->err, err_len, budget - n_out, &n_err);
	struct text out = { 0 }, err = { 0 };
	int r = 0;

	if (keep_out) {
		r = text_add(&out, v->out, keep_out);
		if (r == 0)
			r = add_output(o->outputs, stream_output("stdout", v->out, keep_out));
	}
	if (r == 0 && keep_err) {
		r = text_add(&err, v->err, keep_err);
		if (r == 0)
			r = add_output(o->outputs, stream_output("stderr", v->err, keep_err));
	}
	if (r == 0 && (keep_out < v->out_len || keep_err < err_len)) {
		char note[96];
		int n = snprintf(note, sizeof(note), "[output truncated at %zu characters]\n",
				 budget);

		/* The note starts a line of its own in the joined stderr. */
		if (err.len && err.s[err.len - 1] != '\n')
			r = text_add(&err, "\n", 1);
		if (r == 0)
			r = text_add(&err, note, (size_t)n);
		if (r == 0)
			r = add_output(o->outputs, stream_output("stderr", note, (size_t)n));
	}
	o->stdout_text = out.s;
	o->stdout_len = out.len;
	o->stderr_text = err.s;
	o->stderr_len = err.len;
	return r;
}

/* The timeout's sentence as a stderr stream, in stderr, and as the error output. */
static int add_timeout(const struct exec_view *v, int64_t timeout_s, CellOutcome *o)
{
	struct text err = { .s = o->stderr_text, .len = o->stderr_len };
	char msg[160];
	int r = 0;

	if (v->state_lost)
		snprintf(msg, sizeof(msg),
			 "execution timed out after %" PRId64 "ms; "
			 "session state was reset",
			 timeout_s * 1000);
	else
		snprintf(msg, sizeof(msg),
			 "execution timed out after %" PRId64 "ms and was "
			 "interrupted",
			 timeout_s * 1000);
	if (err.len && err.s[err.len - 1] != '\n')
		r = text_add(&err, "\n", 1);
	if (r == 0)
		r = text_add(&err, msg, strlen(msg));
	if (r == 0)
		r = text_add(&err, "\n", 1);
	o->stderr_text = err.s;
	o->stderr_len = err.len;
	if (r == 0) {
		char line[170];

		snprintf(line, sizeof(line), "%s\n", msg);
		r = add_output(o->outputs, stream_output("stderr", line, strlen(line)));
	}
	if (r == 0)
		r = add_output(o->outputs, error_output("TimeoutError", msg,
							one_line_traceback("TimeoutError", msg)));
	return r;
}

/* The interpreter died under the run: say so with what the daemon wrote last. */
static int add_lost(const struct exec_view *v, CellOutcome *o)
{
	char why[256];

	last_line(v->err, v->err_len, why, sizeof(why));
	if (!why[0])
		snprintf(why, sizeof(why),
			 "the interpreter exited; a new one starts with the next "
			 "call");
	return add_output(o->outputs, error_output("ProcessError", why,
						   one_line_traceback("ProcessError", why)));
}

int cell_outcome_build(const PaddockConfig *cfg, json_object *rep, int64_t timeout_s,
		       CellOutcome *o)
{
	struct exec_view v;
	json_object *last;
	int r;

	*o = (CellOutcome){ .status = "ok" };
	exec_view_read(rep, &v);
	o->execution_count = v.count;
	o->outputs = json_object_new_array();
	if (!o->outputs)
		return -ENOMEM;
	r = add_streams(cfg, &v, o);
	if (r == 0 && !v.timed_out)
		r = add_displays(o->outputs, v.display);
	if (r == 0 && !v.timed_out && v.result && json_object_object_length(v.result) > 0)
		r = add_output(o->outputs,
			       display_output("execute_result", v.result, NULL, v.count));
	if (r == 0 && v.timed_out) {
		o->status = "timeout";
		r = add_timeout(&v, timeout_s, o);
	} else if (r == 0 && v.error) {
		o->status = "error";
		r = add_output(o->outputs, harness_error_output(v.error));
	} else if (r == 0 && v.state_lost) {
		o->status = "error";
		r = add_lost(&v, o);
	} else if (r == 0 && v.return_code != 0) {
		o->status = "error";
	}
	if (r < 0)
		return r;
	o->exit_code = strcmp(o->status, "ok") == 0 ? 0 : 1;
	/* The error output's traceback, for the 1.x model's top-level field. */
	last = json_object_array_length(o->outputs) ?
		       json_object_array_get_idx(o->outputs,
						 json_object_array_length(o->outputs) - 1) :
		       NULL;
	if (last && strcmp(o->status, "ok") != 0) {
		json_object *tb;

		if (json_object_object_get_ex(last, "traceback", &tb))
			o->traceback = json_object_get(tb);
	}
	return 0;
}

int cell_outcome_process_error(const char *why, CellOutcome *o)
{
	json_object *tb;

	*o = (CellOutcome){ .status = "error", .exit_code = 1, .execution_count = -1 };
	o->outputs = json_object_new_array();
	if (!o->outputs)
		return -ENOMEM;
	tb = one_line_traceback("ProcessError", why);
	if (!tb)
		return -ENOMEM;
	o->traceback = json_object_get(tb);
	return add_output(o->outputs, error_output("ProcessError", why, tb));
}

void cell_outcome_clear(CellOutcome *o)
{
	free(o->stdout_text);
	free(o->stderr_text);
	json_putp(&o->outputs);
	json_putp(&o->traceback);
	*o = (CellOutcome){ 0 };
}

/* Every key of the 1.x JupyterOutput model, null where the type does not use it. */
static json_object *all_keys_output(json_object *src)
{
	static const char *const keys[] = { "output_type", "name",     "text",
					    "data",	   "metadata", "execution_count",
					    "ename",	   "evalue",   "traceback" };
	json_object *o = json_object_new_object();

	if (!o)
		return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		/* A value copied (a null stays null), or null when absent. */
		int r = json_object_object_get_ex(src, keys[i], NULL) ?
				json_copy_field(o, src, keys[i]) :
				json_set_null(o, keys[i]);
		if (r < 0) {
			json_object_put(o);
			return NULL;
		}
	}
	return o;
}

json_object *cell_outputs_render(const CellOutcome *o, bool all_keys)
{
	json_object *a;

	if (!all_keys)
		return json_object_get(o->outputs);
	a = json_object_new_array();
	for (size_t i = 0; a && i < json_object_array_length(o->outputs); i++)
		if (add_output(a, all_keys_output(json_object_array_get_idx(o->outputs, i))) < 0) {
			json_object_put(a);
			return NULL;
		}
	return a;
}

json_object *cell_stream_output(const char *name, const char *text, size_t len, bool all_keys)
{
	json_object *o = stream_output(name, text, len), *shaped;

	if (!o || !all_keys)
		return o;
	shaped = all_keys_output(o);
	json_object_put(o);
	return shaped;
}

json_object *cell_display_output(json_object *event, bool all_keys)
{
	json_object *data, *meta, *o, *shaped;

	if (json_in_object(event, "data", &data) <= 0)
		return NULL;
	if (json_in_object(event, "metadata", &meta) <= 0)
		meta = NULL;
	o = display_output("display_data", data, meta, -1);
	if (!o || !all_keys)
		return o;
	shaped = all_keys_output(o);
	json_object_put(o);
	return shaped;
}
