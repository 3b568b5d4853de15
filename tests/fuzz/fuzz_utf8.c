/* SPDX-License-Identifier: MIT */
/* Fuzz target: the strict UTF-8 decoder, checked against a plain reading of Unicode's
 * table of well-formed byte sequences, and the sanitizer built on it. */
#include <string.h>

#include "fuzz.h"
#include "utf8.h"

/* Unicode 15, table 3-7: the well-formed sequence at s, 1..4 bytes, or 0. */
static size_t reference_length(const uint8_t *s, size_t avail)
{
	uint8_t b0, lo = 0x80, hi = 0xbf;
	size_t n;

	if (avail == 0)
		return 0;
	b0 = s[0];
	if (b0 <= 0x7f)
		return 1;
	if (b0 >= 0xc2 && b0 <= 0xdf)
		n = 2;
	else if (b0 >= 0xe0 && b0 <= 0xef)
		n = 3;
	else if (b0 >= 0xf0 && b0 <= 0xf4)
		n = 4;
	else
		return 0;
	if (b0 == 0xe0)
		lo = 0xa0;
	else if (b0 == 0xed)
		hi = 0x9f;
	else if (b0 == 0xf0)
		lo = 0x90;
	else if (b0 == 0xf4)
		hi = 0x8f;
	if (avail < n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	bool valid = true;
	size_t outlen = 0;
	char *clean;

	for (size_t i = 0; i < size; i++) {
		size_t want = reference_length(data + i, size - i);
		size_t got = utf8_sequence_length(s + i, size - i);

		if (want != got)
			fprintf(stderr, "at byte %zu: reference %zu, utf8_sequence_length %zu\n", i,
				want, got);
		FUZZ_ASSERT(want == got);
	}
	for (size_t i = 0; i < size;) {
		size_t n = reference_length(data + i, size - i);

		if (n == 0) {
			valid = false;
			break;
		}
		i += n;
	}
	FUZZ_ASSERT(utf8_valid(s, size) == valid);

	clean = utf8_sanitize(s, size, &outlen);
	FUZZ_ASSERT(clean);
	FUZZ_ASSERT(clean[outlen] == '\0' && outlen <= 3 * size);
	FUZZ_ASSERT(utf8_valid(clean, outlen));
	if (valid)
		FUZZ_ASSERT(outlen == size && memcmp(clean, s, size) == 0);
	else
		FUZZ_ASSERT(outlen > 0);
	/* Valid text cut anywhere: what utf8_whole_prefix keeps is valid, and it holds back
	 * no more than a character's first three bytes. */
	for (size_t cut = 0; valid && cut <= size; cut++) {
		size_t whole = utf8_whole_prefix(s, cut);

		FUZZ_ASSERT(whole <= cut && cut - whole <= 3);
		FUZZ_ASSERT(utf8_valid(s, whole));
	}
	free(clean);
	return 0;
}
