/* SPDX-License-Identifier: MIT */
/* GET /v1|v2/code/info and GET /v1/capabilities: what the probe found, in the plane's shapes. */
#include "code.h"

#include <stdio.h>

#include "cleanup.h"
#include "json.h"

/* The 1.x model bounds a language's timeouts at 300 s; the plane's own maximum is in
 * max_timeout at the top of info and in each language's details. */
#define MODEL_TIMEOUT_MAX 300

/* ---- info ---- */

static json_object *availability(bool ok, const char *version)
{
	json_object *o = json_object_new_object();

	if (!o || json_set(o, "available", json_object_new_boolean(ok)) < 0 ||
	    json_set_string_or_null(o, "version", ok ? version : NULL) < 0) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static json_object *string_list(const char *const *items, size_t n)
{
	json_object *a = json_object_new_array();

	for (size_t i = 0; a && i < n; i++)
		if (items[i] && json_object_array_add(a, json_object_new_string(items[i])) < 0) {
			json_object_put(a);
			return NULL;
		}
	return a;
}

/* One CodeLanguageInfo entry of the 1.x model, with our details. */
static json_object *language_entry(const PaddockConfig *cfg, const char *lang, const char *desc,
				   bool ok, const char *version, const char *const *aliases,
				   size_t n_aliases, const char *tier, const char *missing)
{
	json_object *o = json_object_new_object(), *d = json_object_new_object();
	int64_t def = cfg->exec_timeout_default, max = cfg->exec_timeout_max;

	if (!o || !d || json_set(o, "details", d) < 0) {
		json_object_put(o);
		return NULL;
	}
	if (json_set(o, "language", json_object_new_string(lang)) < 0 ||
	    json_set(o, "description", json_object_new_string(desc)) < 0 ||
	    json_set_string_or_null(o, "runtime_version", ok ? version : NULL) < 0 ||
	    json_set(o, "default_timeout",
		     json_object_new_int64(def < MODEL_TIMEOUT_MAX ? def : MODEL_TIMEOUT_MAX)) <
		    0 ||
	    json_set(o, "max_timeout",
		     json_object_new_int64(max < MODEL_TIMEOUT_MAX ? max : MODEL_TIMEOUT_MAX)) <
		    0 ||
	    json_set(o, "aliases", string_list(aliases, n_aliases)) < 0 ||
	    json_set(d, "available", json_object_new_boolean(ok)) < 0 ||
	    json_set(d, "tier", json_object_new_string(tier)) < 0 ||
	    json_set(d, "default_timeout_seconds", json_object_new_int64(def)) < 0 ||
	    json_set(d, "max_timeout_seconds", json_object_new_int64(max)) < 0 ||
	    json_set_string_or_null(d, "missing", ok ? NULL : missing) < 0) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static json_object *languages_list(const PaddockConfig *cfg, const CodeRuntimes *rt)
{
	static const char *const py_aliases[] = { "python3" };
	static const char *const js_aliases[] = { "node", "nodejs", "js" };
	json_object *a = json_object_new_array();
	char py_desc[128], js_desc[128];

	snprintf(py_desc, sizeof(py_desc), "Python %s on the %s tier%s",
		 rt->python_ok ? rt->python_version : "(not installed)", code_tier_name(rt->tier),
		 rt->tier == CODE_TIER_ENDPOINT ? " (kernels of the Jupyter Server)" :
		 rt->tier == CODE_TIER_KERNEL	? " (IPython)" :
						  " (standard library REPL)");
	snprintf(js_desc, sizeof(js_desc), "JavaScript on Node.js %s (a persistent vm context)",
		 rt->node_ok ? rt->node_version : "(not installed)");
	if (!a ||
	    json_object_array_add(a, language_entry(cfg, "python", py_desc, rt->python_serves,
						    rt->python_version, py_aliases, 1,
						    code_tier_name(rt->tier), rt->python_missing)) <
		    0 ||
	    json_object_array_add(a, language_entry(cfg, "javascript", js_desc, rt->node_ok,
						    rt->node_version, js_aliases, 3, "native",
						    rt->node_missing)) < 0) {
		json_object_put(a);
		return NULL;
	}
	return a;
}

/* One entry of the package set: what it is, whether the sandboxes have it and at which
 * version, and the Debian package that brings it (null where Debian has none). */
static json_object *package_entry(const CodePackage *p)
{
	const CodePackageSpec *s = p->spec;
	json_object *o = json_object_new_object();

	if (!o || json_set(o, "name", json_object_new_string(s->name)) < 0 ||
	    json_set(o, "kind", json_object_new_string(s->tool ? "tool" : "python")) < 0 ||
	    (!s->tool && json_set(o, "import", json_object_new_string(s->module)) < 0) ||
	    json_set(o, "available", json_object_new_boolean(p->found)) < 0 ||
	    json_set_string_or_null(o, "version", p->found && p->version[0] ? p->version : NULL) <
		    0 ||
	    json_set_string_or_null(o, "debian_package", s->debian) < 0) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* The package set as the probe found it, in packaging/package-set's order. */
static json_object *packages_list(const CodeRuntimes *rt)
{
	json_object *a = json_object_new_array();

	for (size_t i = 0; a && i < rt->n_packages; i++)
		if (json_append(a, package_entry(&rt->packages[i])) < 0)
			json_putp(&a);
	return a;
}

/* sessiond's stats (owned), or NULL when it cannot say: one call serves a whole answer. */
static json_object *daemon_stats(ReqCtx *rq)
{
	_cleanup_json_ json_object *req = code_sd_request(rq, "stats", NULL);
	json_object *o = NULL;
	SessiondReply rep;

	if (!req || sessiond_call(&rq->w->sd, req, SESSIOND_RETRY_ANY, &rep) < 0)
		return NULL;
	if (rep.ok)
		o = json_object_get(rep.obj);
	sessiond_reply_clear(&rep);
	return o;
}

/* Warm sandboxes waiting in the default runtime's pools (native and kernel); 0 when the
 * daemon cannot say. */
static int64_t prewarmed(json_object *stats)
{
	int64_t native = 0, kernel = 0;

	if (stats) {
		json_in_int(stats, "pool_ready", &native);
		json_in_int(stats, "pool_kernel_ready", &kernel);
	}
	return native + kernel;
}

/* The runtimes a session may name as its image, as clients see them: no host paths. */
static json_object *runtimes_list(json_object *stats)
{
	static const char *const shown[] = {
		"name",	       "description", "usable", "pool_ready", "pool_kernel_ready",
		"pool_target", "sessions",    "limits"
	};
	json_object *a = json_object_new_array(), *all, *e;

	if (!a || !stats || !json_object_object_get_ex(stats, "runtimes", &all) ||
	    !json_object_is_type(all, json_type_array))
		return a;
	for (size_t i = 0; i < json_object_array_length(all); i++) {
		json_object *src = json_object_array_get_idx(all, i);

		e = json_object_new_object();
		for (size_t k = 0; e && k < ARRAY_SIZE(shown); k++)
			if (json_object_object_get_ex(src, shown[k], NULL) &&
			    json_copy_field(e, src, shown[k]) < 0)
				json_putp(&e);
		if (json_append(a, e) < 0) {
			json_putp(&a);
			break;
		}
	}
	return a;
}

void code_info(ReqCtx *rq)
{
	_cleanup_json_ json_object *stats = daemon_stats(rq);
	const PaddockConfig *cfg = rq->app->cfg;
	const CodeRuntimes *rt = code_runtimes(cfg);
	const char *kinds[] = { rt->python_serves ? "python" : NULL, rt->node_ok ? "nodejs" : NULL,
				rt->kernel_ok || rt->endpoint_ok ? "jupyter" : NULL };
	json_object *d = json_object_new_object();

	if (!d || json_set(d, "backend", json_object_new_string(code_tier_name(rt->tier))) < 0 ||
	    json_set(d, "kinds", string_list(kinds, ARRAY_SIZE(kinds))) < 0 ||
	    json_set(d, "languages", languages_list(cfg, rt)) < 0 ||
	    json_set(d, "python", availability(rt->python_serves, rt->python_version)) < 0 ||
	    json_set(d, "node", availability(rt->node_ok, rt->node_version)) < 0 ||
	    json_set(d, "max_sessions", json_object_new_int64(cfg->code_max_sessions)) < 0 ||
	    json_set(d, "max_kernel_sessions", json_object_new_int64(cfg->kernel_max_sessions)) <
		    0 ||
	    json_set(d, "default_timeout", json_object_new_int64(cfg->exec_timeout_default)) < 0 ||
	    json_set(d, "max_timeout", json_object_new_int64(cfg->exec_timeout_max)) < 0 ||
	    json_set(d, "prewarmed", json_object_new_int64(prewarmed(stats))) < 0 ||
	    json_set(d, "packages", packages_list(rt)) < 0 ||
	    json_set(d, "runtimes", runtimes_list(stats)) < 0) {
		json_object_put(d);
		code_fail(rq, 500, "out of memory");
		return;
	}
	code_reply(rq, 200, true, "Code runtime information", d);
}

/* ---- capabilities ---- */

static json_object *missing_list(const CodeRuntimes *rt)
{
	const char *items[] = { rt->python_serves ? NULL : rt->python_missing,
				rt->node_ok ? NULL : rt->node_missing,
				rt->kernel_ok ? NULL : rt->kernel_missing };
	char tagged[3][600];
	const char *out[3] = { 0 };
	static const char *const what[] = { "python", "node", "kernel" };

	for (size_t i = 0; i < ARRAY_SIZE(items); i++)
		if (items[i] && items[i][0]) {
			snprintf(tagged[i], sizeof(tagged[i]), "%s: %s", what[i], items[i]);
			out[i] = tagged[i];
		}
	return string_list(out, ARRAY_SIZE(out));
}

static json_object *code_interpreter(const PaddockConfig *cfg, const CodeRuntimes *rt)
{
	const char *kinds[] = { rt->python_serves ? "code" : NULL, rt->node_ok ? "nodejs" : NULL,
				rt->kernel_ok || rt->endpoint_ok ? "jupyter" : NULL };
	const char *warnings[ARRAY_SIZE(rt->warnings)];
	json_object *o = json_object_new_object();

	for (size_t i = 0; i < ARRAY_SIZE(warnings); i++)
		warnings[i] = rt->warnings[i][0] ? rt->warnings[i] : NULL;
	if (!o ||
	    json_set(o, "status",
		     json_object_new_string(rt->python_serves || rt->node_ok ? "ready" :
									       "absent")) < 0 ||
	    json_set(o, "backend", json_object_new_string(code_tier_name(rt->tier))) < 0 ||
	    json_set(o, "kinds", string_list(kinds, ARRAY_SIZE(kinds))) < 0 ||
	    json_set_string_or_null(o, "default_python", rt->python_ok ? cfg->python_bin : NULL) <
		    0 ||
	    json_set_string_or_null(o, "default_node", rt->node_ok ? cfg->node_bin : NULL) < 0 ||
	    json_set(o, "missing", missing_list(rt)) < 0 ||
	    json_set(o, "warnings", string_list(warnings, ARRAY_SIZE(warnings))) < 0) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* The sandbox facts the daemon reports (cgroup version, node, the runtimes), or NULL when
 * it is away. */
static json_object *sandbox_facts(json_object *stats)
{
	json_object *o = stats ? json_object_new_object() : NULL;

	if (o &&
	    (json_copy_field(o, stats, "cgroup") < 0 || json_copy_field(o, stats, "node") < 0 ||
	     json_set(o, "runtimes", runtimes_list(stats)) < 0))
		json_putp(&o);
	return o;
}

void code_capabilities(ReqCtx *rq)
{
	_cleanup_json_ json_object *stats = daemon_stats(rq);
	const PaddockConfig *cfg = rq->app->cfg;
	const CodeRuntimes *rt = code_runtimes(cfg);
	json_object *d = json_object_new_object(), *sb = sandbox_facts(stats);

	if (!d || json_set(d, "code_interpreter", code_interpreter(cfg, rt)) < 0 ||
	    (sb ? json_set(d, "sandbox", sb) : json_set_null(d, "sandbox")) < 0) {
		json_object_put(d);
		code_fail(rq, 500, "out of memory");
		return;
	}
	code_reply(rq, 200, true, "Capabilities", d);
}
