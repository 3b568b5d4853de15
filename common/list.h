/* SPDX-License-Identifier: MIT */
/*
 * Intrusive doubly linked lists: a node is any struct with `prev` and `next` pointers to
 * its own type, a list is a pointer to its first node (NULL: empty). The arguments are
 * evaluated more than once: pass plain lvalues.
 */
#pragma once

#include <stddef.h>

/* node becomes the first of the list head. */
#define LIST_PUSH(head, node)                                                                      \
	do {                                                                                       \
		(node)->prev = NULL;                                                               \
		(node)->next = (head);                                                             \
		if (head)                                                                          \
			(head)->prev = (node);                                                     \
		(head) = (node);                                                                   \
	} while (0)

/* node leaves the list head it is on; its links are cleared. */
#define LIST_UNLINK(head, node)                                                                    \
	do {                                                                                       \
		if ((node)->prev)                                                                  \
			(node)->prev->next = (node)->next;                                         \
		else                                                                               \
			(head) = (node)->next;                                                     \
		if ((node)->next)                                                                  \
			(node)->next->prev = (node)->prev;                                         \
		(node)->prev = (node)->next = NULL;                                                \
	} while (0)
