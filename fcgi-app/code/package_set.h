/* SPDX-License-Identifier: MIT */
/* The package set sessions' code expects (packaging/package-set), compiled into the worker. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* One line of packaging/package-set. */
typedef struct CodePackageSpec {
	bool tool;	    /* a command on PATH; else a Python distribution */
	const char *name;   /* the distribution ("scikit-learn") or the command ("jq") */
	const char *module; /* what Python imports ("sklearn"); NULL for a tool */
	const char *debian; /* the Debian 12 package that brings it; NULL when Debian has none */
} CodePackageSpec;

/* The set, in the file's order (generated at build time by cmake/embed_package_set.cmake). */
extern const CodePackageSpec code_package_set[];
extern const size_t code_package_set_count;
