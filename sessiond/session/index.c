/* SPDX-License-Identifier: MIT */
/*
 * Live sessions by id: a hash table with linear probing beside the list of sessions, so
 * that finding the session a request names costs the same with one session as with
 * thousands (walking the list cost about 100 us per request at 1,000 sessions, most of
 * it cache misses).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "session.h"

#define INDEX_MIN_SLOTS 64

/* FNV-1a: ids are short, and random after the node prefix. */
static uint64_t id_hash(const char *id)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const unsigned char *p = (const unsigned char *)id; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	return h;
}

static void slot_put(Session **slots, size_t cap, Session *s)
{
	size_t i = (size_t)s->id_hash & (cap - 1);

	while (slots[i])
		i = (i + 1) & (cap - 1);
	slots[i] = s;
}

/* Room for n sessions with the table at most half full. */
int session_index_reserve(Manager *m, size_t n)
{
	size_t cap = m->index_cap ? m->index_cap : INDEX_MIN_SLOTS;
	Session **slots;

	while (cap / 2 < n)
		cap *= 2;
	if (cap == m->index_cap)
		return 0;
	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < m->index_cap; i++)
		if (m->index[i])
			slot_put(slots, cap, m->index[i]);
	free(m->index);
	m->index = slots;
	m->index_cap = cap;
	return 0;
}

int session_index_add(Manager *m, Session *s)
{
	s->id_hash = id_hash(s->id);
	/* Callers reserve room first; should growing fail anyway, a table with a free slot
	 * still works, only with longer probes. */
	(void)session_index_reserve(m, m->index_n + 1);
	if (m->index_n + 1 >= m->index_cap)
		return -ENOMEM;
	slot_put(m->index, m->index_cap, s);
	m->index_n++;
	return 0;
}

Session *session_index_find(const Manager *m, const char *id)
{
	uint64_t h;
	size_t i;

	if (!m->index_cap)
		return NULL;
	h = id_hash(id);
	for (i = (size_t)h & (m->index_cap - 1); m->index[i]; i = (i + 1) & (m->index_cap - 1))
		if (m->index[i]->id_hash == h && strcmp(m->index[i]->id, id) == 0)
			return m->index[i];
	return NULL;
}

void session_index_remove(Manager *m, const Session *s)
{
	size_t mask = m->index_cap - 1, i, j;

	if (!m->index_cap)
		return;
	for (i = (size_t)s->id_hash & mask; m->index[i] != s; i = (i + 1) & mask)
		if (!m->index[i])
			return; /* not in the table */
	m->index[i] = NULL;
	m->index_n--;
	/* Close the gap: move back each later entry of the run whose home is not between the
	 * gap and itself, so no probe stops early at the hole. */
	for (j = (i + 1) & mask; m->index[j]; j = (j + 1) & mask) {
		size_t home = (size_t)m->index[j]->id_hash & mask;
		bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);

		if (!stays) {
			m->index[i] = m->index[j];
			m->index[j] = NULL;
			i = j;
		}
	}
}

void session_index_free(Manager *m)
{
	free(m->index);
	m->index = NULL;
	m->index_cap = m->index_n = 0;
}
