/* SPDX-License-Identifier: MIT */
/* random.c: ids from blocks of getrandom() bytes, each byte handed out once. */
#include <pthread.h>

#include "random.h"
#include "unit.h"

/* Requests that span block refills are whole, and no two draws repeat. */
static void test_bytes_span_refills(void)
{
	unsigned char a[700], b[700];

	CHECK_EQ_INT(random_bytes(a, sizeof(a)), 0);
	CHECK_EQ_INT(random_bytes(b, sizeof(b)), 0);
	CHECK(memcmp(a, b, sizeof(a)) != 0);
	/* 700 bytes, no run of 64 zero bytes: what a wiped or unfilled block would give. */
	for (size_t i = 0; i + 64 <= sizeof(a); i += 64) {
		static const unsigned char zero[64];

		CHECK(memcmp(a + i, zero, 64) != 0);
		CHECK(memcmp(b + i, zero, 64) != 0);
	}
}

static void test_hex(void)
{
	char x[2 * 12 + 1], y[2 * 12 + 1];
	size_t n = 0;

	memset(x, 'Z', sizeof(x));
	CHECK_EQ_INT(random_hex(x, 12), 0);
	CHECK_EQ_INT(random_hex(y, 12), 0);
	CHECK_EQ_INT(strlen(x), 24);
	for (size_t i = 0; i < 24; i++)
		n += (x[i] >= '0' && x[i] <= '9') || (x[i] >= 'a' && x[i] <= 'f');
	CHECK_EQ_INT(n, 24);
	CHECK(strcmp(x, y) != 0);
}

static void *draw(void *out)
{
	random_bytes(out, 32);
	return NULL;
}

/* Each thread has its own block: two threads' first draws differ. */
static void test_threads_draw_apart(void)
{
	unsigned char a[32], b[32];
	pthread_t t1, t2;

	CHECK_EQ_INT(pthread_create(&t1, NULL, draw, a), 0);
	CHECK_EQ_INT(pthread_create(&t2, NULL, draw, b), 0);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	CHECK(memcmp(a, b, sizeof(a)) != 0);
}

int main(void)
{
	test_bytes_span_refills();
	test_hex();
	test_threads_draw_apart();
	return unit_summary();
}
