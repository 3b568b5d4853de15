/* SPDX-License-Identifier: MIT */
/* Streamed text is cut where reads fall: utf8_whole_prefix holds back a character a read
 * began and did not finish; utf8_chars_prefix counts characters for the caps. */
#include "unit.h"
#include "utf8.h"

static void test_a_cut_character_is_held_back(void)
{
	const char *e_acute = "a\xc3\xa9";	/* a, é */
	const char *euro = "\xe2\x82\xac";	/* € */
	const char *emoji = "\xf0\x9f\x98\x80"; /* 😀 */

	CHECK_EQ_INT(utf8_whole_prefix(e_acute, 3), 3);
	CHECK_EQ_INT(utf8_whole_prefix(e_acute, 2), 1);
	CHECK_EQ_INT(utf8_whole_prefix(euro, 1), 0);
	CHECK_EQ_INT(utf8_whole_prefix(euro, 2), 0);
	CHECK_EQ_INT(utf8_whole_prefix(euro, 3), 3);
	CHECK_EQ_INT(utf8_whole_prefix(emoji, 3), 0);
	CHECK_EQ_INT(utf8_whole_prefix(emoji, 4), 4);
	CHECK_EQ_INT(utf8_whole_prefix("", 0), 0);
	CHECK_EQ_INT(utf8_whole_prefix("abc", 3), 3);
}

static void test_bytes_that_no_read_can_finish_are_left_for_repair(void)
{
	/* Continuation bytes alone, or more of them than a lead promised: nothing to wait for. */
	CHECK_EQ_INT(utf8_whole_prefix("\x80\x80\x80\x80", 4), 4);
	CHECK_EQ_INT(utf8_whole_prefix("\xc3\xa9\xa9", 3), 3);
	CHECK_EQ_INT(utf8_whole_prefix("x\xff", 2), 2);
}

static void test_characters_are_counted_not_bytes(void)
{
	size_t n = 99;

	CHECK_EQ_INT(utf8_chars_prefix("a\xc3\xa9z", 4, 2, &n), 3);
	CHECK_EQ_INT(n, 2);
	CHECK_EQ_INT(utf8_chars_prefix("a\xc3\xa9z", 4, 10, &n), 4);
	CHECK_EQ_INT(n, 3);
	CHECK_EQ_INT(utf8_chars_prefix("abc", 3, 0, NULL), 0);
}

int main(void)
{
	test_a_cut_character_is_held_back();
	test_bytes_that_no_read_can_finish_are_left_for_repair();
	test_characters_are_counted_not_bytes();
	return unit_summary();
}
