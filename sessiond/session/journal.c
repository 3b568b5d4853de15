/* SPDX-License-Identifier: MIT */
/* Batched store writes for the hot path: executions, activity and the rows of destroyed
 * sessions, one transaction a tick. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "session/session.h"

#define JOURNAL_FLUSH_MS 50
#define JOURNAL_MAX 4096

/* One execution waiting to be logged. */
typedef struct JournalEntry {
	char session_id[SESSION_ID_MAX + 1];
	const char *tool; /* a static string */
	double started_at;
	int64_t duration_ms;
	int return_code;
	const char *outcome; /* a static string */
} JournalEntry;

/* A destroyed session whose row is still to go. */
typedef struct JournalDelete {
	char session_id[SESSION_ID_MAX + 1];
} JournalDelete;

/* Pending writes: the log rows, the sessions whose activity changed, the rows to delete. */
struct Journal {
	JournalEntry *entries;
	size_t n, cap;
	JournalDelete *deletes;
	size_t n_deletes, cap_deletes;
	LoopSource *timer;
};

/* items (*cap of size bytes, n used) with room for one more, grown if need be up to
 * JOURNAL_MAX; NULL when there is none: the caller flushes the batch. */
static void *with_room_for_one(void *items, size_t *cap, size_t n, size_t size)
{
	size_t more = *cap ? *cap * 2 : 64;
	void *grown;

	if (n < *cap)
		return items;
	if (n >= JOURNAL_MAX || !(grown = realloc(items, more * size)))
		return NULL;
	*cap = more;
	return grown;
}

void journal_flush(Manager *m)
{
	Journal *j = m->journal;
	int r;

	if (!j)
		return;
	j->timer = loop_remove(m->loop, j->timer);
	r = store_begin(m->store);
	for (size_t i = 0; i < j->n; i++) {
		JournalEntry *e = &j->entries[i];

		store_exec_log(m->store, e->session_id, e->tool, e->started_at, e->duration_ms,
			       e->return_code, e->outcome);
	}
	j->n = 0;
	for (Session *s = m->sessions; s; s = s->next)
		if (s->dirty) {
			store_session_touch(m->store, s->id, s->last_activity_at,
					    (int64_t)s->execution_count);
			s->dirty = false;
		}
	for (size_t i = 0; i < j->n_deletes; i++)
		store_session_delete(m->store, j->deletes[i].session_id);
	j->n_deletes = 0;
	if (r == 0)
		r = store_commit(m->store);
	if (r < 0)
		log_err("store: batched write failed: %s", strerror(-r));
}

static void on_flush(Loop *l, void *data)
{
	Manager *m = data;

	(void)l;
	m->journal->timer = NULL;
	journal_flush(m);
}

void journal_note(Session *s, const char *tool, double started_at, int64_t duration_ms,
		  int return_code, const char *outcome)
{
	Manager *m = s->m;
	Journal *j = m->journal;
	JournalEntry *e;

	s->dirty = true;
	if ((e = with_room_for_one(j->entries, &j->cap, j->n, sizeof(*e))))
		j->entries = e;
	else
		journal_flush(m);
	if (j->n < j->cap) {
		e = &j->entries[j->n++];
		memcpy(e->session_id, s->id, sizeof(e->session_id));
		e->tool = tool;
		e->started_at = started_at;
		e->duration_ms = duration_ms;
		e->return_code = return_code;
		e->outcome = outcome;
	}
	if (!j->timer)
		loop_add_timer(m->loop, JOURNAL_FLUSH_MS, on_flush, m, &j->timer);
}

/*
 * A destroyed session's row goes with the next batch: the session is gone from memory at
 * once, and a row that outlives a crash names an init that was killed, which a restarted
 * daemon drops. A full batch is written first; without any room, the row goes now.
 */
void journal_note_delete(Manager *m, const char *id)
{
	Journal *j = m->journal;
	JournalDelete *d;

	if (!j) {
		store_session_delete(m->store, id);
		return;
	}
	if ((d = with_room_for_one(j->deletes, &j->cap_deletes, j->n_deletes, sizeof(*d))))
		j->deletes = d;
	else
		journal_flush(m);
	if (j->n_deletes == j->cap_deletes) {
		store_session_delete(m->store, id);
		return;
	}
	snprintf(j->deletes[j->n_deletes++].session_id, SESSION_ID_MAX + 1, "%s", id);
	if (!j->timer)
		loop_add_timer(m->loop, JOURNAL_FLUSH_MS, on_flush, m, &j->timer);
}

/* A new row for id must not meet the old one, nor be deleted with it: flush first. */
void journal_before_insert(Manager *m, const char *id)
{
	Journal *j = m->journal;

	for (size_t i = 0; j && i < j->n_deletes; i++)
		if (strcmp(j->deletes[i].session_id, id) == 0) {
			journal_flush(m);
			return;
		}
}

int journal_new(Manager *m)
{
	m->journal = calloc(1, sizeof(*m->journal));
	return m->journal ? 0 : -ENOMEM;
}

void journal_free(Manager *m)
{
	if (!m->journal)
		return;
	journal_flush(m);
	free(m->journal->entries);
	free(m->journal->deletes);
	free(m->journal);
	m->journal = NULL;
}
