/* SPDX-License-Identifier: MIT */
/* Tool results as MCP content: a run's output as text, its rich outputs as images or text,
 * its error as a failing result the model reads. */
#include "mcp.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "cleanup.h"
#include "json.h"

json_object *mcp_text(const char *text, size_t len)
{
	json_object *o = json_object_new_object();

	json_set(o, "type", json_object_new_string("text"));
	json_set(o, "text", json_object_new_string_len(text, (int)len));
	return o;
}

json_object *mcp_image(const char *base64, const char *mime)
{
	json_object *o = json_object_new_object();

	json_set(o, "type", json_object_new_string("image"));
	json_set(o, "data", json_object_new_string(base64));
	json_set(o, "mimeType", json_object_new_string(mime));
	return o;
}

json_object *mcp_tool_result(json_object *content, bool is_error)
{
	json_object *o = json_object_new_object();

	json_set(o, "content", content ? content : json_object_new_array());
	json_set(o, "isError", json_object_new_boolean(is_error));
	return o;
}

json_object *mcp_tool_text(bool is_error, const char *fmt, ...)
{
	json_object *content = json_object_new_array();
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* A long path may be cut inside a character: the text ends before it. */
	json_append(content, mcp_text(msg, utf8_whole_prefix(msg, strlen(msg))));
	return mcp_tool_result(content, is_error);
}

/* Where the terminal sequence starting with ESC at s[i] ends (the index of its last byte),
 * or i itself for a lone ESC: CSI (ESC '[', parameter and intermediate bytes, one final
 * byte), OSC (ESC ']' up to BEL or ESC '\\'), and two-byte escapes (ESC and one byte of
 * 0x40..0x7e). Anything else is not a sequence, and its text stays. */
static size_t escape_end(const char *s, size_t i, size_t len)
{
	size_t j = i + 2;

	if (i + 1 >= len)
		return i;
	if (s[i + 1] == '[') {
		while (j < len && (unsigned char)s[j] >= 0x30 && (unsigned char)s[j] <= 0x3f)
			j++;
		while (j < len && (unsigned char)s[j] >= 0x20 && (unsigned char)s[j] <= 0x2f)
			j++;
		return j < len && (unsigned char)s[j] >= 0x40 && (unsigned char)s[j] <= 0x7e ? j :
											       i;
	}
	if (s[i + 1] == ']') {
		for (; j < len; j++) {
			if (s[j] == '\a')
				return j;
			if (s[j] == '\033')
				return j + 1 < len && s[j + 1] == '\\' ? j + 1 : i;
		}
		return i;
	}
	return (unsigned char)s[i + 1] >= 0x40 && (unsigned char)s[i + 1] <= 0x7e ? i + 1 : i;
}

/* Text without the terminal's control sequences (IPython colours its tracebacks): a model
 * reads the words, not the colours. A lone ESC goes, and nothing else. Returns a new
 * string (len in *out_len). */
static char *strip_ansi(const char *s, size_t len, size_t *out_len)
{
	char *o = malloc(len + 1);
	size_t n = 0;

	if (!o)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\033') {
			i = escape_end(s, i, len);
			continue;
		}
		o[n++] = s[i];
	}
	o[n] = '\0';
	*out_len = n;
	return o;
}

/* A text block of s when it holds anything. */
static void add_text(json_object *content, const char *s, size_t len)
{
	_cleanup_free_ char *plain = NULL;
	size_t n;

	if (!s || !len)
		return;
	plain = strip_ansi(s, len, &n);
	if (!plain) {
		json_append(content, NULL); /* marks content incomplete */
		return;
	}
	if (n)
		json_append(content, mcp_text(plain, n));
}

/* The image types MCP clients show; a bundle's first of them wins over its text. */
static const char *const image_types[] = { "image/png", "image/jpeg", "image/gif", "image/webp" };

/* One mime bundle ({"text/plain": ..., "image/png": base64, ...}) as one block: an image
 * when it has one, else its plain text. Anything else in it is dropped. */
static void add_bundle(json_object *content, json_object *bundle)
{
	const char *s;
	size_t len;

	if (!bundle || !json_object_is_type(bundle, json_type_object))
		return;
	/* The bundle is the program's own (user code can display anything): an image that is
	 * not base64 would make the client refuse the whole result, so it is not one. */
	for (size_t i = 0; i < ARRAY_SIZE(image_types); i++)
		if (json_in_string(bundle, image_types[i], &s, &len) > 0 && len > 0 &&
		    base64_decode(s, len, NULL) > 0) {
			json_append(content, mcp_image(s, image_types[i]));
			return;
		}
	if (json_in_string(bundle, "text/plain", &s, &len) > 0)
		add_text(content, s, len);
}

static void add_displays(json_object *content, json_object *rep)
{
	json_object *display, *data;

	if (!json_object_object_get_ex(rep, "display", &display) ||
	    !json_object_is_type(display, json_type_array))
		return;
	for (size_t i = 0; i < json_object_array_length(display); i++)
		if (json_in_object(json_object_array_get_idx(display, i), "data", &data) > 0)
			add_bundle(content, data);
}

/* The error's traceback lines joined, or "ename: evalue" when it has none. */
static void add_error(json_object *content, json_object *err)
{
	_cleanup_free_ char *text = NULL;
	const char *ename = "Error", *evalue = "";
	json_object *tb;
	size_t len = 0;
	FILE *f;

	f = open_memstream(&text, &len);
	if (!f) {
		json_append(content, NULL);
		return;
	}
	if (json_object_object_get_ex(err, "traceback", &tb) &&
	    json_object_is_type(tb, json_type_array) && json_object_array_length(tb) > 0) {
		for (size_t i = 0; i < json_object_array_length(tb); i++) {
			json_object *l = json_object_array_get_idx(tb, i);

			if (json_object_is_type(l, json_type_string))
				fprintf(f, "%s\n", json_object_get_string(l));
		}
	} else {
		json_in_string(err, "ename", &ename, NULL);
		json_in_string(err, "evalue", &evalue, NULL);
		fprintf(f, "%s: %s\n", ename, evalue);
	}
	if (fclose(f) != 0) {
		json_append(content, NULL);
		return;
	}
	add_text(content, text, len);
}

/* "Files written: a.png, out/b.csv" for the files the run made or changed. */
static void add_files(json_object *content, json_object *rep)
{
	_cleanup_free_ char *text = NULL;
	json_object *files;
	size_t len = 0, n = 0;
	FILE *f;

	if (!json_object_object_get_ex(rep, "files", &files) ||
	    !json_object_is_type(files, json_type_array) || !json_object_array_length(files))
		return;
	f = open_memstream(&text, &len);
	if (!f) {
		json_append(content, NULL);
		return;
	}
	fputs("Files written (read them with read_file): ", f);
	for (size_t i = 0; i < json_object_array_length(files); i++) {
		const char *name;

		if (json_in_string(json_object_array_get_idx(files, i), "filename", &name, NULL) >
		    0)
			fprintf(f, "%s%s", n++ ? ", " : "", name);
	}
	if (fclose(f) != 0) {
		json_append(content, NULL);
		return;
	}
	if (n)
		json_append(content, mcp_text(text, len));
}

static bool rep_flag(json_object *rep, const char *key)
{
	bool v = false;

	return json_in_bool(rep, key, &v) > 0 && v;
}

json_object *mcp_exec_result(json_object *rep)
{
	json_object *content = json_object_new_array(), *result = NULL, *err = NULL;
	const char *out = NULL, *errtext = NULL, *note = NULL;
	size_t out_len = 0, err_len = 0, note_len = 0;
	int64_t rc = 0;
	bool failed;

	json_in_string(rep, "stdout", &out, &out_len);
	json_in_string(rep, "stderr", &errtext, &err_len);
	json_in_int(rep, "return_code", &rc);
	json_in_object(rep, "result", &result);
	json_in_object(rep, "error", &err);
	/* In cell mode what happened to the run (a timeout, a cancel) is a note of its own. */
	json_in_string(rep, "note", &note, &note_len);
	if (note && errtext && memmem(errtext, err_len, note, note_len))
		note = NULL;
	failed = rc != 0 || err || rep_flag(rep, "timed_out") || rep_flag(rep, "state_lost") ||
		 rep_flag(rep, "cancelled");
	/* In the order a notebook shows them: what was printed and displayed, the value, then
	 * what went wrong. */
	add_text(content, out, out_len);
	add_displays(content, rep);
	add_bundle(content, result);
	add_text(content, errtext, err_len);
	if (err)
		add_error(content, err);
	if (note)
		add_text(content, note, note_len);
	add_files(content, rep);
	if (failed && rc != 0 && !err && !err_len && !note) {
		char line[64];
		int n = snprintf(line, sizeof(line), "exit status %lld", (long long)rc);

		json_append(content, mcp_text(line, (size_t)n));
	}
	return mcp_tool_result(content, failed);
}

/* What the model can act on when sessiond refuses a call, in its own words. */
static const struct {
	const char *kind;
	const char *fallback;
} refusals[] = {
	{ "busy", "the sandbox is running another call; wait for it, or cancel it" },
	{ "invalid", "the arguments are not valid" },
	{ "bad_request", "the arguments are not valid" },
	{ "forbidden", "the path is outside the workspace" },
	{ "too_large", "the content is larger than the configured limit" },
	{ "exists", "something is in the way at that path" },
};

json_object *mcp_sd_refusal(const SessiondReply *rep)
{
	/* A missing file or directory is the model's to fix; a missing session is not. */
	if (rep && !rep->ok && rep->kind && strcmp(rep->kind, "not_found") == 0 &&
	    !sessiond_session_gone(rep))
		return mcp_tool_error("%s", rep->detail && *rep->detail ?
						    rep->detail :
						    "no such file or directory");
	for (size_t i = 0; rep && !rep->ok && rep->kind && i < ARRAY_SIZE(refusals); i++)
		if (strcmp(rep->kind, refusals[i].kind) == 0)
			return mcp_tool_error("%s", rep->detail && *rep->detail ?
							    rep->detail :
							    refusals[i].fallback);
	return NULL;
}
