/* SPDX-License-Identifier: MIT */
/* Unit tests for node_name: what a host name gives when it is not set, and what is refused. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "config.h"

#include "unit.h"

static bool from_host_is(const char *host, const char *want)
{
	char out[NODE_NAME_MAX + 1];

	config_node_name_from_host(host, out, sizeof(out));
	if (strcmp(out, want) != 0) {
		fprintf(stderr, "host '%s' gave '%s', expected '%s'\n", host, out, want);
		return false;
	}
	return config_node_name_valid(out);
}

static void test_host_name_gives_its_first_label_in_letters_and_digits(void)
{
	char long_host[200], want[NODE_NAME_MAX + 1];

	CHECK(from_host_is("paddock-vm", "paddockvm"));
	CHECK(from_host_is("paddock-vm.example.com", "paddockvm"));
	CHECK(from_host_is("web_01-b.lan", "web01b"));
	CHECK(from_host_is("nodea", "nodea"));
	CHECK(from_host_is("NodeA2", "NodeA2"));
	CHECK(from_host_is("", "node"));
	CHECK(from_host_is("---", "node"));
	CHECK(from_host_is(".example.com", "node"));
	memset(long_host, 'a', sizeof(long_host) - 1);
	long_host[sizeof(long_host) - 1] = '\0';
	memset(want, 'a', NODE_NAME_MAX);
	want[NODE_NAME_MAX] = '\0';
	CHECK(from_host_is(long_host, want));
}

static void test_node_name_is_letters_and_digits_up_to_its_max(void)
{
	char name[NODE_NAME_MAX + 2];

	CHECK(config_node_name_valid("nodea"));
	CHECK(config_node_name_valid("N1"));
	CHECK(!config_node_name_valid(""));
	/* A hyphen would let "<a>-" begin the ids of a node named "<a>-<b>". */
	CHECK(!config_node_name_valid("paddock-vm"));
	CHECK(!config_node_name_valid("a_b"));
	CHECK(!config_node_name_valid("a.b"));
	CHECK(!config_node_name_valid("n\xc3\xa9"));
	memset(name, 'x', NODE_NAME_MAX);
	name[NODE_NAME_MAX] = '\0';
	CHECK(config_node_name_valid(name));
	name[NODE_NAME_MAX] = 'x';
	name[NODE_NAME_MAX + 1] = '\0';
	CHECK(!config_node_name_valid(name));
}

/* config_load: an unset node_name comes from this host's name; a set one is checked. */
static void test_unset_node_name_comes_from_the_host_and_a_set_one_is_checked(void)
{
	char host[256] = "", want[NODE_NAME_MAX + 1], err[512] = "";
	PaddockConfig c;

	unsetenv("PADDOCK_NODE_NAME");
	gethostname(host, sizeof(host) - 1);
	config_node_name_from_host(host, want, sizeof(want));
	CHECK_EQ_INT(config_load(&c, NULL, err, sizeof(err)), 0);
	CHECK_EQ_STR(c.node_name, want);
	CHECK(c.node_name_derived);
	config_free(&c);

	setenv("PADDOCK_NODE_NAME", "nodeb", 1);
	CHECK_EQ_INT(config_load(&c, NULL, err, sizeof(err)), 0);
	CHECK_EQ_STR(c.node_name, "nodeb");
	CHECK(!c.node_name_derived);
	config_free(&c);

	setenv("PADDOCK_NODE_NAME", "paddock-vm", 1);
	CHECK_EQ_INT(config_load(&c, NULL, err, sizeof(err)), -EINVAL);
	CHECK_CONTAINS(err, "node_name");
	CHECK_CONTAINS(err, "'paddock-vm'");
	CHECK_CONTAINS(err, "letters and digits");
	config_free(&c);
	unsetenv("PADDOCK_NODE_NAME");
}

/* What tmpfs holds in the session's memory, and the programs' share, must fit in
 * memory_max_bytes: /tmp always, the workspace only with workspace_backend = tmpfs. */
static void test_file_systems_and_programs_must_fit_in_memory_max(void)
{
	char err[512] = "";
	PaddockConfig c;

	CHECK_EQ_INT(config_load(&c, NULL, err, sizeof(err)), 0);
	CHECK_EQ_STR(c.workspace_backend, "disk");
	CHECK_LE_INT(c.tmp_bytes + c.program_memory_min_bytes, c.memory_max_bytes);
	config_free(&c);

	/* on disk, a workspace far larger than the memory is a normal configuration */
	setenv("PADDOCK_WORKSPACE_BYTES", "10G", 1);
	CHECK_EQ_INT(config_load(&c, NULL, err, sizeof(err)), 0);
	config_free(&c);

	setenv("PADDOCK_WORKSPACE_BACKEND", "tmpfs", 1);
	CHECK_EQ_INT(config_load(&c, NULL, err, sizeof(err)), -EINVAL);
	CHECK_CONTAINS(err, "workspace_bytes (10737418240)");
	CHECK_CONTAINS(err, "memory_max_bytes");
	config_free(&c);

	setenv("PADDOCK_WORKSPACE_BYTES", "512M", 1);
	CHECK_EQ_INT(config_load(&c, NULL, err, sizeof(err)), 0);
	config_free(&c);

	unsetenv("PADDOCK_WORKSPACE_BACKEND");
	setenv("PADDOCK_TMP_BYTES", "1G", 1);
	CHECK_EQ_INT(config_load(&c, NULL, err, sizeof(err)), -EINVAL);
	CHECK_CONTAINS(err, "tmp_bytes (1073741824)");
	config_free(&c);

	setenv("PADDOCK_MEMORY_MAX_BYTES", "2G", 1);
	CHECK_EQ_INT(config_load(&c, NULL, err, sizeof(err)), 0);
	config_free(&c);

	setenv("PADDOCK_WORKSPACE_BACKEND", "nfs", 1);
	CHECK_EQ_INT(config_load(&c, NULL, err, sizeof(err)), -EINVAL);
	CHECK_CONTAINS(err, "workspace_backend");
	config_free(&c);
	unsetenv("PADDOCK_WORKSPACE_BACKEND");
	unsetenv("PADDOCK_TMP_BYTES");
	unsetenv("PADDOCK_WORKSPACE_BYTES");
	unsetenv("PADDOCK_MEMORY_MAX_BYTES");
}

/* preload_modules: dotted module names separated by commas, or nothing; what the template
 * is handed is never anything else. */
static void test_preload_modules_are_module_names(void)
{
	static const char *const good[] = { "", "numpy", "numpy,pandas,matplotlib.pyplot",
					    "_private,a1.b_2" };
	static const char *const bad[] = { ",",	     "numpy,", ",numpy", "numpy,,pandas",
					   "1numpy", "a..b",   "a.",	 "os; import x",
					   "a b",    "a,-b",   "é" };
	char err[512] = "";
	PaddockConfig c;

	CHECK_EQ_INT(config_load(&c, NULL, err, sizeof(err)), 0);
	CHECK_EQ_STR(c.preload_modules, "numpy,pandas,matplotlib.pyplot");
	CHECK(c.python_template);
	CHECK(c.template_direct_fork);
	config_free(&c);
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		setenv("PADDOCK_PRELOAD_MODULES", good[i], 1);
		CHECK_EQ_INT(config_load(&c, NULL, err, sizeof(err)), 0);
		config_free(&c);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		setenv("PADDOCK_PRELOAD_MODULES", bad[i], 1);
		CHECK_EQ_INT(config_load(&c, NULL, err, sizeof(err)), -EINVAL);
		CHECK_CONTAINS(err, "preload_modules");
		config_free(&c);
	}
	unsetenv("PADDOCK_PRELOAD_MODULES");
}

int main(void)
{
	test_preload_modules_are_module_names();
	test_host_name_gives_its_first_label_in_letters_and_digits();
	test_node_name_is_letters_and_digits_up_to_its_max();
	test_unset_node_name_comes_from_the_host_and_a_set_one_is_checked();
	test_file_systems_and_programs_must_fit_in_memory_max();
	return unit_summary();
}
