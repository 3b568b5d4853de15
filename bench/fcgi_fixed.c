/* SPDX-License-Identifier: MIT */
/* Bench peer: a FastCGI program that reads each request and answers one fixed reply at once. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcgiapp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What every thread serves. */
struct fixed {
	int listen_fd;	   /* the FastCGI socket */
	const char *reply; /* the body every request gets */
	size_t reply_len;  /* its length */
};

static void *serve(void *arg)
{
	const struct fixed *fx = arg;
	FCGX_Request req;
	char sink[65536], head[160];
	int head_len = snprintf(head, sizeof(head),
				"Status: 200 OK\r\nContent-Type: application/json\r\n"
				"Content-Length: %zu\r\n\r\n",
				fx->reply_len);

	if (FCGX_InitRequest(&req, fx->listen_fd, 0) != 0)
		return NULL;
	while (FCGX_Accept_r(&req) >= 0) {
		/* Read the body like a real handler, then answer. */
		while (FCGX_GetStr(sink, sizeof(sink), req.in) > 0)
			;
		FCGX_PutStr(head, head_len, req.out);
		FCGX_PutStr(fx->reply, (int)fx->reply_len, req.out);
		FCGX_Finish_r(&req);
	}
	return NULL;
}

static char *read_reply(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0, r;

	if (!f)
		return NULL;
	do {
		if (n == cap) {
			char *grown = realloc(buf, cap ? cap * 2 : 4096);

			if (!grown) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = grown;
			cap = cap ? cap * 2 : 4096;
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
	} while (r > 0);
	fclose(f);
	*len = n;
	return buf;
}

int main(int argc, char **argv)
{
	struct fixed fx = { 0 };
	pthread_t th[64];
	int threads;

	if (argc != 4 || (threads = atoi(argv[2])) < 1 || threads > 64) {
		fprintf(stderr, "usage: fcgi_fixed SOCKET THREADS REPLY_FILE\n");
		return 2;
	}
	fx.reply = read_reply(argv[3], &fx.reply_len);
	if (!fx.reply) {
		fprintf(stderr, "fcgi_fixed: %s: %s\n", argv[3], strerror(errno));
		return 1;
	}
	if (FCGX_Init() != 0)
		return 1;
	unlink(argv[1]);
	fx.listen_fd = FCGX_OpenSocket(argv[1], 64);
	if (fx.listen_fd < 0) {
		fprintf(stderr, "fcgi_fixed: cannot listen on %s\n", argv[1]);
		return 1;
	}
	/* nginx's workers run as another user. */
	chmod(argv[1], 0666);
	for (int i = 0; i < threads; i++)
		if (pthread_create(&th[i], NULL, serve, &fx) != 0)
			return 1;
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	return 0;
}
