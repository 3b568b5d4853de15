/* SPDX-License-Identifier: MIT */
/*
 * A larger read buffer for libfcgi's request-body stream.
 *
 * libfcgi reads a request's stdin from its socket into a buffer of 8 KiB that it sizes
 * itself, one read(2) per 8 KiB: 12,800 system calls for a 100 MiB upload, which were
 * most of the worker's CPU for it. The library offers no way to size that buffer, so
 * this swaps it for a larger one through the stream's private data, libfcgi's
 * FCGX_Stream_Data, mirrored below as every release from 2.1 to 2.4.7 declares it.
 *
 * The swap is made only when the stream is what that layout says it is: its data names
 * this request, it reads stdin, and its pointers lie inside its buffer in the order the
 * reader keeps them. Anything else leaves the stream as it was, and the body is read
 * 8 KiB at a time as before. The bytes libfcgi has read and not yet handed out (the rest
 * of the current record's content, and whatever followed it) move to the new buffer
 * with their offsets kept, so the reader resumes where it stopped.
 */
#include "http.h"

#include <errno.h>
#include <fastcgi.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* libfcgi's FCGX_Stream_Data (fcgiapp.c), field for field. */
struct fcgx_stream_data {
	unsigned char *buff;	  /* the buffer, 8-byte aligned */
	int bufflen;		  /* its size */
	unsigned char *mBuff;	  /* the buffer as malloc() returned it (freed by libfcgi) */
	unsigned char *buffStop;  /* reader: end of the bytes read into it */
	int type;		  /* reader: FCGI_PARAMS or FCGI_STDIN */
	int eorStop;		  /* reader: stop at the record's end */
	int skip;		  /* reader: drop content */
	int contentLen;		  /* reader: content of the current record not yet read */
	int paddingLen;		  /* reader: its padding not yet read */
	int isAnythingWritten;	  /* writer only */
	int rawWrite;		  /* writer only */
	FCGX_Request *reqDataPtr; /* the request the stream belongs to */
};

/* Whether req's stdin stream is laid out as struct fcgx_stream_data says. */
static bool reader_is_known(const FCGX_Request *req, const FCGX_Stream *s,
			    const struct fcgx_stream_data *d)
{
	return s->isReader && !s->isClosed && d && d->reqDataPtr == req && d->type == FCGI_STDIN &&
	       !d->skip && !d->eorStop && d->bufflen > 0 && d->mBuff && d->buff >= d->mBuff &&
	       d->buff - d->mBuff < 8 && d->buff <= s->rdNext && s->rdNext <= s->stop &&
	       s->stop <= d->buffStop && d->buffStop <= d->buff + d->bufflen &&
	       s->wrNext == s->stop;
}

int http_reader_enlarge(FCGX_Request *req, size_t size)
{
	FCGX_Stream *s = req->in;
	struct fcgx_stream_data *d;
	unsigned char *nb;
	size_t unread, content;

	if (!s || size > INT_MAX)
		return -EINVAL;
	d = s->data;
	if (!reader_is_known(req, s, d))
		return -EPROTO;
	if ((size_t)d->bufflen >= size)
		return 0;
	nb = malloc(size);
	if (!nb)
		return -ENOMEM;
	unread = (size_t)(d->buffStop - s->rdNext);
	content = (size_t)(s->stop - s->rdNext);
	memcpy(nb, s->rdNext, unread);
	free(d->mBuff);
	d->mBuff = d->buff = nb;
	d->bufflen = (int)size;
	d->buffStop = nb + unread;
	s->rdNext = s->stopUnget = nb;
	s->stop = s->wrNext = nb + content;
	return 0;
}
