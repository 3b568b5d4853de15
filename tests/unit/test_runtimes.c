/* SPDX-License-Identifier: MIT */
/* Unit tests for the runtime profiles' files: names, settings, bounds, what is inherited. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "runtimes.h"

#include "unit.h"

static char dir[] = "/tmp/paddock-unit-runtimes-XXXXXX";

static void put(const char *file, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void drop(const char *file)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	unlink(path);
}

/* Load with the profiles of dir; err gets the message. */
static int load(PaddockConfig *c, char *err, size_t len)
{
	int r;

	err[0] = '\0';
	r = config_load(c, NULL, err, len);
	return r < 0 ? r : runtimes_load(c, err, len);
}

static void test_names(void)
{
	char name[RUNTIME_NAME_MAX + 2];

	CHECK(runtime_name_valid("data"));
	CHECK(runtime_name_valid("py3.12_slim-2"));
	CHECK(!runtime_name_valid(RUNTIME_DEFAULT));
	CHECK(!runtime_name_valid(""));
	CHECK(!runtime_name_valid(".hidden"));
	CHECK(!runtime_name_valid("-x"));
	CHECK(!runtime_name_valid("Data"));
	CHECK(!runtime_name_valid("a/b"));
	CHECK(!runtime_name_valid("../etc"));
	memset(name, 'a', RUNTIME_NAME_MAX);
	name[RUNTIME_NAME_MAX] = '\0';
	CHECK(runtime_name_valid(name));
	name[RUNTIME_NAME_MAX] = 'a';
	name[RUNTIME_NAME_MAX + 1] = '\0';
	CHECK(!runtime_name_valid(name));
}

static void test_profiles_load_sorted_with_the_global_settings_inherited(void)
{
	char err[512];
	PaddockConfig c;

	put("zeta.conf", "root = /srv/zeta\nmemory_max_bytes = 2G\negress = true\n");
	put("alpha.conf", "# a comment\n\nroot = /srv/alpha\npool_size = 3\ndescription = A\n");
	put("Bad Name.conf", "root = /x\n");	/* not a profile's name: not read */
	put("beta.conf.dpkg-old", "garbage\n"); /* not .conf: not read */
	CHECK_EQ_INT(load(&c, err, sizeof(err)), 0);
	CHECK_EQ_INT((long long)c.n_runtimes, 2);
	CHECK_EQ_STR(c.runtimes[0].name, "alpha");
	CHECK_EQ_STR(c.runtimes[0].root, "/srv/alpha");
	CHECK_EQ_STR(c.runtimes[0].description, "A");
	CHECK_EQ_INT(c.runtimes[0].pool_size, 3);
	CHECK_EQ_INT(c.runtimes[0].memory_max_bytes, c.memory_max_bytes);
	CHECK_EQ_INT(c.runtimes[0].pids_max, c.pids_max);
	CHECK_EQ_INT(c.runtimes[0].egress, c.egress);
	CHECK_EQ_INT(c.runtimes[1].pool_size, 1);
	CHECK_EQ_INT(c.runtimes[1].memory_max_bytes, 2LL << 30);
	CHECK(c.runtimes[1].egress);
	CHECK_EQ_INT((long long)runtime_find(&c, "zeta"), 2);
	CHECK_EQ_INT((long long)runtime_find(&c, "alpha"), 1);
	CHECK_EQ_INT((long long)runtime_find(&c, "default"), 0);
	CHECK_EQ_INT((long long)runtime_find(&c, "nope"), 0);
	CHECK_EQ_INT((long long)runtime_find(&c, NULL), 0);
	CHECK_EQ_STR(runtime_name(&c, 0), "default");
	CHECK_EQ_STR(runtime_name(&c, 2), "zeta");
	config_free(&c);
	drop("zeta.conf");
	drop("alpha.conf");
	drop("Bad Name.conf");
	drop("beta.conf.dpkg-old");
}

/* One bad file refuses the whole configuration, naming the file and what is wrong. */
static void refused(const char *text, const char *why)
{
	char err[512];
	PaddockConfig c;

	put("bad.conf", text);
	CHECK_EQ_INT(load(&c, err, sizeof(err)), -EINVAL);
	CHECK_CONTAINS(err, "bad.conf");
	CHECK_CONTAINS(err, why);
	config_free(&c);
	drop("bad.conf");
}

static void test_bad_profiles_are_refused(void)
{
	char many[32];
	char err[512];
	PaddockConfig c;

	refused("pool_size = 2\n", "root: missing");
	refused("root = relative\n", "absolute");
	refused("root = /x\nnot a setting line\n", "bad.conf:2");
	refused("root = /x\nmemory = 1G\n", "memory: not a runtime profile setting");
	refused("root = /x\npool_size = -1\n", "pool_size");
	refused("root = /x\npids_max = 2\n", "pids_max");
	refused("root = /x\nmemory_max_bytes = 1Q\n", "memory_max_bytes");
	refused("root = /x\negress = maybe\n", "egress");
	/* /tmp held in the session's memory must leave its programs room */
	refused("root = /x\nmemory_max_bytes = 300M\n", "program_memory_min_bytes");

	for (int i = 0; i <= RUNTIMES_MAX; i++) {
		snprintf(many, sizeof(many), "p%02d.conf", i);
		put(many, "root = /x\n");
	}
	CHECK_EQ_INT(load(&c, err, sizeof(err)), -EINVAL);
	CHECK_CONTAINS(err, "more than 16 runtime profiles");
	config_free(&c);
	for (int i = 0; i <= RUNTIMES_MAX; i++) {
		snprintf(many, sizeof(many), "p%02d.conf", i);
		drop(many);
	}
}

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	setenv("PADDOCK_RUNTIMES_DIR", dir, 1);
	test_names();
	test_profiles_load_sorted_with_the_global_settings_inherited();
	test_bad_profiles_are_refused();
	rmdir(dir);
	return unit_summary();
}
