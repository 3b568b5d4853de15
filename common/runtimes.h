/* SPDX-License-Identifier: MIT */
/*
 * Runtime profiles: named trees sessions run on instead of the host's /usr. Each is a file
 * <runtimes_dir>/<name>.conf of key = value lines:
 *
 *   root = /var/lib/paddock/runtimes/data   (required: an absolute path)
 *   description = ...                        pool_size = 1      kernel_prewarm = 0
 *   memory_max_bytes, pids_max, cpu_quota_percent, egress: the global setting unless set
 *
 * The configured profiles are the allow-list of CreateSession's image.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* Read every profile of c->runtimes_dir (missing: none) into c->runtimes, sorted by name,
 * after config_load(): a profile takes what its file leaves out from the global settings.
 * On error, writes a message naming the file and key to err and returns -EINVAL (what was
 * read is freed with config_free()). */
int runtimes_load(PaddockConfig *c, char *err, size_t errlen);
void runtimes_free(PaddockConfig *c);

/* Whether name may name a profile (RUNTIME_DEFAULT aside). */
bool runtime_name_valid(const char *name);
/* The profile named name as an index: 1..n_runtimes; 0 for NULL, RUNTIME_DEFAULT or a
 * name no profile has. */
size_t runtime_find(const PaddockConfig *c, const char *name);
/* The name of index i (0: RUNTIME_DEFAULT). */
const char *runtime_name(const PaddockConfig *c, size_t i);
