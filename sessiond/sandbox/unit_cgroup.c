/* SPDX-License-Identifier: MIT */
/* The cgroup systemd gave a unit, asked over systemd's own bus socket at start-up. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-bus.h>

#include "cleanup.h"
#include "sandbox_internal.h"

/* systemd answers root on this socket without a D-Bus broker (systemctl does the same). */
#define SYSTEMD_PRIVATE_BUS "unix:path=/run/systemd/private"

static void bus_unrefp(sd_bus **b)
{
	if (*b)
		sd_bus_flush_close_unref(*b);
}

/* The D-Bus interface that holds ControlGroup for the unit's type, from its suffix. */
static const char *unit_interface(const char *unit)
{
	static const struct {
		const char *suffix, *iface;
	} types[] = {
		{ ".service", "org.freedesktop.systemd1.Service" },
		{ ".scope", "org.freedesktop.systemd1.Scope" },
		{ ".slice", "org.freedesktop.systemd1.Slice" },
	};
	size_t ul = strlen(unit);

	for (size_t i = 0; i < ARRAY_SIZE(types); i++) {
		size_t sl = strlen(types[i].suffix);

		if (ul > sl && strcmp(unit + ul - sl, types[i].suffix) == 0)
			return types[i].iface;
	}
	return NULL;
}

static int bus_connect(sd_bus **ret)
{
	_cleanup_(bus_unrefp) sd_bus *bus = NULL;
	int r;

	r = sd_bus_new(&bus);
	if (r >= 0)
		r = sd_bus_set_address(bus, SYSTEMD_PRIVATE_BUS);
	if (r >= 0)
		r = sd_bus_start(bus);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(bus);
	return 0;
}

int systemd_unit_cgroup(const char *unit, char *buf, size_t len)
{
	_cleanup_(bus_unrefp) sd_bus *bus = NULL;
	_cleanup_(sd_bus_error_free) sd_bus_error err = SD_BUS_ERROR_NULL;
	_cleanup_free_ char *path = NULL, *cg = NULL;
	const char *iface = unit_interface(unit);
	int r;

	if (!iface) {
		sandbox_set_error("cgroup_root: systemd:%s is not a service, scope or slice", unit);
		return -EINVAL;
	}
	r = bus_connect(&bus);
	if (r < 0) {
		sandbox_set_error("cgroup_root: cannot reach systemd at /run/systemd/private: %s "
				  "(is systemd running this host?)",
				  strerror(-r));
		return r;
	}
	r = sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit, &path);
	if (r >= 0)
		r = sd_bus_get_property_string(bus, "org.freedesktop.systemd1", path, iface,
					       "ControlGroup", &err, &cg);
	if (r < 0) {
		sandbox_set_error("cgroup_root: asking systemd for %s's cgroup: %s", unit,
				  err.message ?: strerror(-r));
		return r;
	}
	/* Empty while the unit is not running: there is no cgroup to put sandboxes in. */
	if (!cg[0]) {
		sandbox_set_error("cgroup_root: %s is not running (systemctl start %s)", unit,
				  unit);
		return -ENOENT;
	}
	if (snprintf(buf, len, "%s", cg) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}
