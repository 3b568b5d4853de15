/* SPDX-License-Identifier: MIT */
/* Unit tests for the cgroup2 mountinfo reader and the favordynmods remount options. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "mountinfo.h"
#include "sandbox/sandbox.h"

#include "unit.h"

static void test_options_have_matches_whole_options_only(void)
{
	CHECK(mount_options_have("rw,nsdelegate,favordynmods", "favordynmods"));
	CHECK(mount_options_have("favordynmods", "favordynmods"));
	CHECK(mount_options_have("rw,nsdelegate", "rw"));
	CHECK(!mount_options_have("rw,favordynmodsx", "favordynmods"));
	CHECK(!mount_options_have("rw,xfavordynmods", "favordynmods"));
	CHECK(!mount_options_have("", "rw"));
	CHECK(!mount_options_have("rw,relatime", "ro"));
}

/* Any line: optional fields before the separator, escapes kept, ro from either list. */
static void test_any_line_keeps_escapes_and_reads_ro_from_either_list(void)
{
	MountLine m;

	CHECK_EQ_INT(mountinfo_parse(
			     "191 44 254:0 /work/lib /opt/my\\040dir ro,nosuid shared:1 master:2 "
			     "- ext4 /dev/vda rw,discard\n",
			     &m),
		     0);
	CHECK_EQ_STR(m.mnt, "/opt/my\\040dir");
	CHECK_EQ_STR(m.fstype, "ext4");
	CHECK_EQ_STR(m.mount_opts, "ro,nosuid");
	CHECK_EQ_STR(m.super_opts, "rw,discard");
	CHECK(m.read_only);
	CHECK_EQ_INT(mountinfo_parse("22 1 8:1 / / rw - tmpfs tmpfs ro,size=4k\n", &m), 0);
	CHECK(m.read_only);
	CHECK_EQ_INT(mountinfo_parse("22 1 8:1 / / rw - tmpfs tmpfs rw\n", &m), 0);
	CHECK(!m.read_only);
	CHECK_EQ_INT(mountinfo_parse("22 1 8:1 / / rw tmpfs tmpfs rw\n", &m), -EINVAL);
	CHECK_EQ_INT(mountinfo_parse("22 1 - tmpfs tmpfs rw\n", &m), -EINVAL);
	CHECK_EQ_INT(mountinfo_parse("", &m), -EINVAL);
	/* A field longer than its buffer is refused, not cut (and the rest misread). */
	{
		static char line[8192];
		int n = snprintf(line, sizeof(line), "22 1 8:1 / /");

		memset(line + n, 'a', 4500);
		snprintf(line + n + 4500, sizeof(line) - (size_t)n - 4500,
			 " rw - tmpfs tmpfs rw\n");
		CHECK_EQ_INT(mountinfo_parse(line, &m), -EINVAL);
		n = snprintf(line, sizeof(line), "22 1 8:1 / / rw,");
		memset(line + n, 'o', 600);
		snprintf(line + n + 600, sizeof(line) - (size_t)n - 600, " - tmpfs tmpfs rw\n");
		CHECK_EQ_INT(mountinfo_parse(line, &m), -EINVAL);
	}
}

static void test_cgroup2_mount_is_found_in_every_layout(void)
{
	char mnt[64], opts[64], tiny[8];
	bool ro = true;

	/* The hybrid layout, then a v2 host with systemd's options, then a v1 hierarchy. */
	CHECK_EQ_INT(mountinfo_parse_cgroup2(
			     "35 25 0:30 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,"
			     "relatime shared:10 - cgroup2 cgroup2 rw\n",
			     mnt, sizeof(mnt), opts, sizeof(opts), &ro),
		     0);
	CHECK_EQ_STR(mnt, "/sys/fs/cgroup/unified");
	CHECK_EQ_STR(opts, "rw");
	CHECK(!ro);
	CHECK_EQ_INT(mountinfo_parse_cgroup2(
			     "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime "
			     "shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n",
			     mnt, sizeof(mnt), opts, sizeof(opts), &ro),
		     0);
	CHECK_EQ_STR(mnt, "/sys/fs/cgroup");
	CHECK_EQ_STR(opts, "rw,nsdelegate,memory_recursiveprot");
	CHECK_EQ_INT(
		mountinfo_parse_cgroup2("36 25 0:31 / /sys/fs/cgroup/cpu rw,relatime shared:11 - "
					"cgroup cgroup rw,cpu\n",
					mnt, sizeof(mnt), opts, sizeof(opts), &ro),
		-ENOENT);
	/* Read-only per mount (a service's ProtectControlGroups) or per superblock. */
	CHECK_EQ_INT(mountinfo_parse_cgroup2(
			     "30 23 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime "
			     "shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
			     mnt, sizeof(mnt), opts, sizeof(opts), &ro),
		     0);
	CHECK(ro);
	CHECK_EQ_INT(
		mountinfo_parse_cgroup2("30 23 0:26 / /sys/fs/cgroup rw shared:4 - cgroup2 cgroup2 "
					"ro,nsdelegate\n",
					mnt, sizeof(mnt), opts, sizeof(opts), &ro),
		0);
	CHECK(ro);
	/* Malformed lines and short buffers. */
	CHECK_EQ_INT(
		mountinfo_parse_cgroup2("garbage\n", mnt, sizeof(mnt), opts, sizeof(opts), &ro),
		-ENOENT);
	CHECK_EQ_INT(mountinfo_parse_cgroup2("1 2 3 4 - cgroup2\n", mnt, sizeof(mnt), opts,
					     sizeof(opts), &ro),
		     -ENOENT);
	CHECK_EQ_INT(
		mountinfo_parse_cgroup2("30 23 0:26 / /sys/fs/cgroup rw shared:4 - cgroup2 cgroup2 "
					"rw,nsdelegate\n",
					tiny, sizeof(tiny), opts, sizeof(opts), &ro),
		-ENAMETOOLONG);
}

static void test_remount_options_gain_favordynmods_once(void)
{
	char out[64];

	CHECK_EQ_INT(cgroup2_favor_dynmods_options("rw,nsdelegate,memory_recursiveprot", out,
						   sizeof(out)),
		     1);
	CHECK_EQ_STR(out, "rw,nsdelegate,memory_recursiveprot,favordynmods");
	CHECK_EQ_INT(cgroup2_favor_dynmods_options("rw", out, sizeof(out)), 1);
	CHECK_EQ_STR(out, "rw,favordynmods");
	CHECK_EQ_INT(cgroup2_favor_dynmods_options("", out, sizeof(out)), 1);
	CHECK_EQ_STR(out, "favordynmods");
	CHECK_EQ_INT(cgroup2_favor_dynmods_options("rw,favordynmods,nsdelegate", out, sizeof(out)),
		     0);
	CHECK_EQ_INT(cgroup2_favor_dynmods_options("rw,nsdelegate", out, 8), -ENAMETOOLONG);
}

static void test_this_host_has_a_cgroup2_mount_or_none(void)
{
	char mnt[4096], opts[512];
	bool ro;
	int r = mountinfo_find_cgroup2(mnt, sizeof(mnt), opts, sizeof(opts), &ro);

	/* Whatever the layout, the answer is a cgroup2 mount point or "none". */
	CHECK(r == 0 || r == -ENOENT);
	if (r == 0) {
		CHECK_EQ_INT(mnt[0], '/');
		CHECK_NE_INT(opts[0], '\0');
	}
}

int main(void)
{
	test_options_have_matches_whole_options_only();
	test_any_line_keeps_escapes_and_reads_ro_from_either_list();
	test_cgroup2_mount_is_found_in_every_layout();
	test_remount_options_gain_favordynmods_once();
	test_this_host_has_a_cgroup2_mount_or_none();
	return unit_summary();
}
