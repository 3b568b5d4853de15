/* SPDX-License-Identifier: MIT */
/* What the code plane can run here: probe the interpreters once and pick the Python tier. */
#include "code.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "clock.h"
#include "log.h"

#define PROBE_TIMEOUT_MS 20000
#define PROBE_OUT_MAX 1024

/* Imports IPython (the kernel tier needs it) and reports ipykernel beside it. */
static const char ipython_probe[] = "import IPython\n"
				    "print(IPython.__version__)\n"
				    "try:\n"
				    "    import ipykernel\n"
				    "    print('ipykernel', ipykernel.__version__)\n"
				    "except Exception:\n"
				    "    pass\n";

/*
 * The endpoint tier's probe, run with the bridge's Python: the bridge's websocket client
 * imports, and GET <endpoint>/api/status answers 200 with the URL's token. The URL comes in
 * the environment (PADDOCK_JUPYTER_ENDPOINT), never on a command line; nothing printed
 * carries the token.
 */
static const char endpoint_probe[] =
	"import os, sys, urllib.error, urllib.parse, urllib.request\n"
	"try:\n"
	"    import websocket\n"
	"except Exception as e:\n"
	"    print('the bridge cannot import websocket (python3-websocket):', e)\n"
	"    sys.exit(3)\n"
	"try:\n"
	"    u = urllib.parse.urlsplit(os.environ['PADDOCK_JUPYTER_ENDPOINT'])\n"
	"    t = (urllib.parse.parse_qs(u.query).get('token') or [''])[0]\n"
	"    host = u.hostname if ':' not in (u.hostname or '') else '[%s]' % u.hostname\n"
	"    path = u.path.strip('/')\n"
	"    url = '%s://%s%s/%sapi/status' % (u.scheme, host, ':%d' % u.port if u.port else '',\n"
	"                                       path + '/' if path else '')\n"
	"    if u.scheme not in ('http', 'https') or not u.hostname:\n"
	"        raise ValueError('not an http(s) URL')\n"
	"except Exception as e:\n"
	"    print('is not a usable URL:', e)\n"
	"    sys.exit(4)\n"
	"h = {'Authorization': 'token ' + t} if t else {}\n"
	"try:\n"
	"    r = urllib.request.urlopen(urllib.request.Request(url, headers=h), timeout=3)\n"
	"    print('ok', r.status)\n"
	"except urllib.error.HTTPError as e:\n"
	"    print('answered HTTP %d' % e.code)\n"
	"    sys.exit(5)\n"
	"except Exception as e:\n"
	"    print('did not answer:', getattr(e, 'reason', e))\n"
	"    sys.exit(5)\n";

/*
 * Finds each entry of the package set without importing it (scikit-learn alone takes a
 * second to import): a module by importlib's finder, its version from its distribution's
 * metadata; a command on PATH, its version from the first line of its --version. argv[1]
 * holds the entries, blank-separated, as "python:<name>:<module>" or "tool:<name>"; it
 * prints one line per entry: "<index> 1 <version>" (the version may be empty) or
 * "<index> 0". The index keeps a stray line on stderr (a warning) from shifting the rest.
 */
static const char packages_probe[] =
	"import importlib.metadata, importlib.util, re, shutil, subprocess, sys\n"
	"def python(name, module):\n"
	"    try:\n"
	"        if importlib.util.find_spec(module) is None:\n"
	"            return None\n"
	"    except (ImportError, ValueError):\n"
	"        return None\n"
	"    try:\n"
	"        return importlib.metadata.version(name)\n"
	"    except Exception:\n"
	"        return ''\n"
	"def tool(name):\n"
	"    path = shutil.which(name)\n"
	"    if path is None:\n"
	"        return None\n"
	"    try:\n"
	"        r = subprocess.run([path, '--version'], capture_output=True, text=True,\n"
	"                           errors='replace', timeout=5)\n"
	"        m = re.search(r'[0-9]+(\\.[0-9]+)+', (r.stdout or r.stderr).split('\\n')[0])\n"
	"        return m.group(0) if m else ''\n"
	"    except Exception:\n"
	"        return ''\n"
	"for i, entry in enumerate(sys.argv[1].split()):\n"
	"    kind, _, rest = entry.partition(':')\n"
	"    v = python(*rest.split(':')) if kind == 'python' else tool(rest)\n"
	"    print(i, '0' if v is None else '1 ' + v)\n";

static CodeRuntimes runtimes;
static char endpoint_note[384]; /* what the endpoint probe found, for the warnings */
static const PaddockConfig *probe_cfg;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t probe_cfg_lock = PTHREAD_MUTEX_INITIALIZER;

const char *code_tier_name(enum code_tier t)
{
	return t == CODE_TIER_ENDPOINT ? "endpoint" : t == CODE_TIER_KERNEL ? "kernel" : "native";
}

/* extra: one more "NAME=value" for the environment, or NULL. */
static int spawn_with_pipe(char *const argv[], int out_fd, char *extra, pid_t *pid)
{
	char *const env[] = { "PATH=/usr/local/bin:/usr/bin:/bin",
			      "LANG=C.UTF-8",
			      "HOME=/tmp",
			      "MPLBACKEND=Agg",
			      extra,
			      NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, dfl;
	int r;

	sigemptyset(&none);
	sigemptyset(&dfl);
	/* The worker blocks SIGTERM and ignores SIGPIPE; the probe must not inherit that. */
	sigaddset(&dfl, SIGPIPE);
	posix_spawn_file_actions_init(&fa);
	posix_spawnattr_init(&at);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
	posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
	/* Nothing else of the worker's: its nginx connections are not close-on-exec. */
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &dfl);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	r = -posix_spawn(pid, argv[0], &fa, &at, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	return r;
}

/* Collect a child's output until it closes the pipe or the deadline passes. */
static bool read_until_eof(int fd, char *out, size_t outlen)
{
	int64_t deadline = (int64_t)now_ms() + PROBE_TIMEOUT_MS;
	size_t used = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - (int64_t)now_ms();
		char buf[256];
		ssize_t n;

		if (left <= 0)
			return false;
		if (poll(&p, 1, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			return false;
		}
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return true;
		if (used + 1 < outlen) {
			size_t take = (size_t)n < outlen - 1 - used ? (size_t)n : outlen - 1 - used;

			memcpy(out + used, buf, take);
			used += take;
			out[used] = '\0';
		}
	}
}

/* Run argv with a bounded wait; out gets what it printed. 0 when it exited 0, else < 0. */
static int run_probe_env(char *const argv[], char *extra_env, char *out, size_t outlen)
{
	_cleanup_close_ int rfd = -1, wfd = -1;
	int pfd[2], status = 0;
	bool done;
	pid_t pid;
	int r;

	out[0] = '\0';
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	rfd = pfd[0];
	wfd = pfd[1];
	r = spawn_with_pipe(argv, wfd, extra_env, &pid);
	if (r < 0)
		return r;
	wfd = safe_close(wfd);
	done = read_until_eof(rfd, out, outlen);
	if (!done)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!done)
		return -ETIMEDOUT;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -ENOEXEC;
}

static int run_probe(char *const argv[], char *out, size_t outlen)
{
	return run_probe_env(argv, NULL, out, outlen);
}

/* "Python 3.11.2\n" -> "3.11.2"; "v20.1.0\n" -> "20.1.0". */
static void version_from(const char *text, char *ver, size_t len)
{
	const char *p = text + strcspn(text, "0123456789");

	snprintf(ver, len, "%.*s", (int)strcspn(p, " \r\n"), p);
}

static void probe_python(const PaddockConfig *cfg, CodeRuntimes *rt)
{
	char out[PROBE_OUT_MAX];
	char *const ver_argv[] = { cfg->python_bin, "--version", NULL };
	char *const ipy_argv[] = { cfg->python_bin, "-I", "-c", (char *)ipython_probe, NULL };
	int r = run_probe(ver_argv, out, sizeof(out));

	if (r < 0) {
		snprintf(rt->python_missing, sizeof(rt->python_missing),
			 "looked for python3 at %s (python_bin), and it %s", cfg->python_bin,
			 r == -ENOENT ? "does not exist" : "did not run");
		return;
	}
	rt->python_ok = true;
	version_from(out, rt->python_version, sizeof(rt->python_version));
	r = run_probe(ipy_argv, out, sizeof(out));
	if (r < 0)
		return;
	rt->ipython_ok = true;
	version_from(out, rt->ipython_version, sizeof(rt->ipython_version));
	rt->ipykernel_ok = strstr(out, "ipykernel") != NULL;
}

static void probe_node(const PaddockConfig *cfg, CodeRuntimes *rt)
{
	char out[PROBE_OUT_MAX];
	char *const argv[] = { cfg->node_bin, "--version", NULL };
	int r = run_probe(argv, out, sizeof(out));

	if (r < 0) {
		snprintf(rt->node_missing, sizeof(rt->node_missing),
			 "looked for node at %s (node_bin), and it %s", cfg->node_bin,
			 r == -ENOENT ? "does not exist" : "did not run");
		return;
	}
	rt->node_ok = true;
	version_from(out, rt->node_version, sizeof(rt->node_version));
}

/* packages_probe's argument: the whole set in one string. */
static int packages_probe_arg(char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < code_package_set_count; i++) {
		const CodePackageSpec *s = &code_package_set[i];
		int n = s->tool ? snprintf(buf + used, len - used, "tool:%s ", s->name) :
				  snprintf(buf + used, len - used, "python:%s:%s ", s->name,
					   s->module);

		if (n < 0 || (size_t)n >= len - used)
			return -ENAMETOOLONG;
		used += (size_t)n;
	}
	return 0;
}

/* Fill the entries from packages_probe's lines; an entry without a line stays absent. */
static void packages_parse(char *out, CodePackage *pkgs, size_t n)
{
	char *save = NULL;

	for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *end;
		unsigned long i = strtoul(line, &end, 10);

		if (end == line || i >= n || strncmp(end, " 1", 2) != 0)
			continue;
		pkgs[i].found = true;
		if (end[2] == ' ')
			snprintf(pkgs[i].version, sizeof(pkgs[i].version), "%s", end + 3);
	}
}

/*
 * What of the package set the sandboxes will find: they see the host's /usr, so the host's
 * python_bin and PATH answer for them. One run for the whole set, once per worker, so
 * /v1/code/info costs no probe.
 */
static void probe_packages(const PaddockConfig *cfg, CodeRuntimes *rt)
{
	char arg[4096], out[4096];
	char *const argv[] = { cfg->python_bin, "-I", "-c", (char *)packages_probe, arg, NULL };
	size_t n = code_package_set_count;
	int r;

	rt->packages = calloc(n, sizeof(*rt->packages));
	if (!rt->packages)
		return;
	rt->n_packages = n;
	for (size_t i = 0; i < n; i++)
		rt->packages[i].spec = &code_package_set[i];
	if (!rt->python_ok)
		return;
	if (packages_probe_arg(arg, sizeof(arg)) < 0) {
		log_warn("code plane: the package set is too long for its probe's argument");
		return;
	}
	r = run_probe(argv, out, sizeof(out));
	if (r < 0) {
		out[strcspn(out, "\n")] = '\0';
		log_warn("code plane: cannot tell which of the package set is installed (%s): %s",
			 r == -ETIMEDOUT ? "the probe timed out" : "the probe failed", out);
		return;
	}
	packages_parse(out, rt->packages, n);
}

/* The selection ladder: kernel when IPython imports, else native; code_backend pins one. */
static void pick_tier(const PaddockConfig *cfg, CodeRuntimes *rt)
{
	bool pinned_native = strcmp(cfg->code_backend, "native") == 0;
	bool pinned_kernel = strcmp(cfg->code_backend, "kernel") == 0;

	rt->kernel_ok = rt->python_ok && rt->ipython_ok && !pinned_native;
	if (!rt->python_ok)
		snprintf(rt->kernel_missing, sizeof(rt->kernel_missing), "%s", rt->python_missing);
	else if (!rt->ipython_ok)
		snprintf(rt->kernel_missing, sizeof(rt->kernel_missing),
			 "looked for IPython ('import IPython' with %s), and it is not installed",
			 cfg->python_bin);
	else if (pinned_native)
		snprintf(rt->kernel_missing, sizeof(rt->kernel_missing),
			 "code_backend (AIO_CODE_BACKEND) pins the native tier");
	rt->tier = rt->kernel_ok ? CODE_TIER_KERNEL : CODE_TIER_NATIVE;
	rt->python_serves = rt->python_ok;
	if (pinned_kernel) {
		rt->tier = CODE_TIER_KERNEL;
		rt->python_serves = rt->kernel_ok;
		if (!rt->kernel_ok && rt->python_ok)
			snprintf(rt->python_missing, sizeof(rt->python_missing),
				 "code_backend (AIO_CODE_BACKEND) pins the kernel tier, and %.400s",
				 rt->kernel_missing);
	}
}

/* The endpoint URL without its query (the token), fragment or user info. */
static void endpoint_shown(const char *url, char *out, size_t len)
{
	const char *auth = strstr(url, "://"), *at;
	size_t head = auth ? (size_t)(auth + 3 - url) : 0, end;

	auth = url + head;
	end = strcspn(auth, "/?#");
	at = memchr(auth, '@', end);
	if (at)
		snprintf(out, len, "%.*s%.*s", (int)head, url, (int)strcspn(at + 1, "?#"), at + 1);
	else
		snprintf(out, len, "%.*s", (int)(head + strcspn(auth, "?#")), url);
}

/* The top of the ladder: jupyter_endpoint, when it answers, serves Python (unless pinned). */
static void probe_endpoint(const PaddockConfig *cfg, CodeRuntimes *rt)
{
	char out[PROBE_OUT_MAX], shown[128], env[4200];
	char *const argv[] = { cfg->python_bin, "-I", "-c", (char *)endpoint_probe, NULL };
	int r;

	if (!cfg->jupyter_endpoint[0])
		return;
	endpoint_shown(cfg->jupyter_endpoint, shown, sizeof(shown));
	if (strcmp(cfg->code_backend, "auto") != 0) {
		snprintf(endpoint_note, sizeof(endpoint_note),
			 "jupyter_endpoint (AIO_JUPYTER_ENDPOINT) is set, but code_backend "
			 "(AIO_CODE_BACKEND) pins the %s tier; the endpoint was not tried",
			 cfg->code_backend);
		return;
	}
	if (!rt->python_ok) {
		snprintf(endpoint_note, sizeof(endpoint_note),
			 "jupyter_endpoint (AIO_JUPYTER_ENDPOINT) %.80s was not tried: its bridge "
			 "runs on %.80s (python_bin), which is missing",
			 shown, cfg->python_bin);
		return;
	}
	snprintf(env, sizeof(env), "PADDOCK_JUPYTER_ENDPOINT=%s", cfg->jupyter_endpoint);
	r = run_probe_env(argv, env, out, sizeof(out));
	out[strcspn(out, "\r\n")] = '\0';
	if (r == 0) {
		rt->endpoint_ok = true;
		rt->tier = CODE_TIER_ENDPOINT;
		rt->python_serves = true;
		rt->python_missing[0] = '\0';
		log_info("code plane: the Jupyter Server at %s answered; Python runs there", shown);
		return;
	}
	snprintf(endpoint_note, sizeof(endpoint_note),
		 "jupyter_endpoint (AIO_JUPYTER_ENDPOINT) %.80s was tried (GET api/status, 3 s): "
		 "%.80s; Python runs on the %s tier",
		 shown, r == -ETIMEDOUT ? "the probe timed out" : out, code_tier_name(rt->tier));
	log_warn("code plane: %s", endpoint_note);
}

static void note_warnings(const PaddockConfig *cfg, CodeRuntimes *rt)
{
	size_t n = 0;

	if (endpoint_note[0])
		snprintf(rt->warnings[n++], sizeof(rt->warnings[0]), "%s", endpoint_note);
	if (cfg->kernel_prewarm > 0 && !rt->kernel_ok)
		snprintf(rt->warnings[n++], sizeof(rt->warnings[0]),
			 "kernel_prewarm (AIO_KERNEL_PREWARM) is set, but there is no kernel tier "
			 "to warm");
}

static void probe_run(void)
{
	const PaddockConfig *cfg;
	CodeRuntimes *rt = &runtimes;

	pthread_mutex_lock(&probe_cfg_lock);
	cfg = probe_cfg;
	pthread_mutex_unlock(&probe_cfg_lock);
	probe_python(cfg, rt);
	probe_node(cfg, rt);
	probe_packages(cfg, rt);
	pick_tier(cfg, rt);
	probe_endpoint(cfg, rt);
	note_warnings(cfg, rt);
	log_info("code plane: python %s, node %s, IPython %s; Python runs on the %s tier",
		 rt->python_ok ? rt->python_version : "missing",
		 rt->node_ok ? rt->node_version : "missing",
		 rt->ipython_ok ? rt->ipython_version : "missing", code_tier_name(rt->tier));
}

static void set_cfg(const PaddockConfig *cfg)
{
	pthread_mutex_lock(&probe_cfg_lock);
	if (!probe_cfg)
		probe_cfg = cfg;
	pthread_mutex_unlock(&probe_cfg_lock);
}

const CodeRuntimes *code_runtimes(const PaddockConfig *cfg)
{
	set_cfg(cfg);
	pthread_once(&probe_once, probe_run);
	return &runtimes;
}

static void *probe_thread(void *arg)
{
	code_runtimes(arg);
	return NULL;
}

static pthread_t early_probe;
static bool early_probe_started;

void code_probe_start(const PaddockConfig *cfg)
{
	set_cfg(cfg);
	/* Without the thread the first request runs the probe: slower, not wrong. */
	early_probe_started = pthread_create(&early_probe, NULL, probe_thread, (void *)cfg) == 0;
	if (!early_probe_started)
		log_warn("code plane: cannot start the runtime probe early");
}

void code_probe_wait(void)
{
	if (early_probe_started)
		pthread_join(early_probe, NULL);
	early_probe_started = false;
}
