/* SPDX-License-Identifier: MIT */
/* Replays a committed corpus through a fuzz target without libFuzzer, for ctest. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Read a whole file into an exact-size allocation, so ASan sees reads past its end. */
static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rbe");
	uint8_t *buf;
	long size;
	size_t got;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fseek(f, 0, SEEK_END) < 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0) {
		fprintf(stderr, "replay: %s: cannot size it\n", path);
		fclose(f);
		return -1;
	}
	buf = malloc(size ? (size_t)size : 1);
	if (!buf) {
		fclose(f);
		return -1;
	}
	got = fread(buf, 1, (size_t)size, f);
	fclose(f);
	if (got != (size_t)size) {
		fprintf(stderr, "replay: %s: short read\n", path);
		free(buf);
		return -1;
	}
	LLVMFuzzerTestOneInput(buf, got);
	free(buf);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Replay every regular file of dir, in name order; returns how many, or -1. */
static long replay_dir(const char *dir)
{
	struct dirent **names;
	long done = 0;
	int n = scandir(dir, &names, NULL, by_name);

	if (n < 0) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;

		if (names[i]->d_name[0] != '.' &&
		    snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name) <
			    (int)sizeof(path) &&
		    stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			if (replay_file(path) < 0)
				done = -1;
			else if (done >= 0)
				done++;
		}
		free(names[i]);
	}
	free(names);
	return done;
}

int main(int argc, char **argv)
{
	long total = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR|FILE...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		long n;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		n = S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : (replay_file(argv[i]) < 0 ? -1 : 1);
		if (n < 0)
			return 1;
		total += n;
	}
	/* An empty corpus replays nothing and would pass whatever the target does. */
	if (total == 0) {
		fprintf(stderr, "replay: no inputs found\n");
		return 1;
	}
	printf("replayed %ld inputs\n", total);
	return 0;
}
