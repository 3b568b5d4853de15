/* SPDX-License-Identifier: MIT */
/* Streaming multipart/form-data parsing: a byte-driven state machine with bounded memory. */
#include "multipart.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cleanup.h"

#define PADDING_MAX 256 /* transport padding allowed after a delimiter */

enum mp_state {
	MP_PREAMBLE,	/* before the first delimiter: ignored */
	MP_AFTER_DELIM, /* "\r\n--boundary" matched: "--", padding or CRLF must follow */
	MP_AFTER_DASH,	/* one '-' after the boundary: a second makes the close delimiter */
	MP_PADDING,	/* spaces and tabs before the delimiter line's CRLF */
	MP_DELIM_CR,	/* the CR ending the delimiter line; LF must follow */
	MP_HEADERS,	/* a part's header block, up to the empty line */
	MP_DATA,	/* a part's body */
	MP_EPILOGUE,	/* after the close delimiter: ignored */
	MP_ERROR,	/* stopped; err says why */
};

struct MultipartParser {
	MultipartCallbacks cb; /* the caller's callbacks */
	char *delim;	       /* "\r\n--" + boundary */
	size_t dlen;	       /* length of delim */
	size_t match;	       /* how many bytes of delim matched; held back, not yet emitted */
	enum mp_state state;   /* where we are */
	bool from_data;	       /* the delimiter being checked ended a part's data */
	bool in_part;	       /* part_begin called and part_end not yet */
	size_t padding;	       /* padding bytes seen after the current delimiter */
	size_t parts;	       /* parts begun */
	size_t max_parts;      /* cap on parts */
	char *hdr;	       /* the current header block */
	size_t hlen;	       /* bytes in hdr */
	size_t hmax;	       /* cap on hdr */
	char *name;	       /* decoded name parameter, hmax + 1 bytes */
	char *filename;	       /* decoded filename parameter, hmax + 1 bytes */
	char *scratch;	       /* other parameters' values, parsed and dropped */
	bool has_filename;     /* the current part has a filename parameter */
	int err;	       /* the error in MP_ERROR */
};

/* RFC 2046 bchars; we also refuse nothing else printable so odd clients still work. */
static bool boundary_char_ok(unsigned char c)
{
	return c >= 0x20 && c < 0x7f;
}

int multipart_parser_new(const char *boundary, const MultipartCallbacks *cb, size_t max_parts,
			 size_t max_header_bytes, MultipartParser **ret)
{
	_cleanup_free_ MultipartParser *p = NULL;
	size_t blen = strlen(boundary);

	if (blen == 0 || blen > MULTIPART_BOUNDARY_MAX || max_header_bytes == 0)
		return -EINVAL;
	for (size_t i = 0; i < blen; i++)
		if (!boundary_char_ok((unsigned char)boundary[i]))
			return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->cb = *cb;
	p->max_parts = max_parts;
	p->hmax = max_header_bytes;
	p->dlen = blen + 4;
	p->delim = malloc(p->dlen + 1);
	p->hdr = malloc(p->hmax);
	p->name = malloc(p->hmax + 1);
	p->filename = malloc(p->hmax + 1);
	p->scratch = malloc(p->hmax + 1);
	if (!p->delim || !p->hdr || !p->name || !p->filename || !p->scratch) {
		multipart_parser_free(TAKE_PTR(p));
		return -ENOMEM;
	}
	memcpy(p->delim, "\r\n--", 4);
	memcpy(p->delim + 4, boundary, blen + 1);
	/* The first delimiter may open the body without a CRLF before it: start as if the
	 * CRLF had been seen. A delimiter later in the preamble needs its CRLF. */
	p->match = 2;
	p->state = MP_PREAMBLE;
	*ret = TAKE_PTR(p);
	return 0;
}

MultipartParser *multipart_parser_free(MultipartParser *p)
{
	if (!p)
		return NULL;
	free(p->delim);
	free(p->hdr);
	free(p->name);
	free(p->filename);
	free(p->scratch);
	free(p);
	return NULL;
}

size_t multipart_parts(const MultipartParser *p)
{
	return p->parts;
}

static int fail(MultipartParser *p, int err)
{
	p->state = MP_ERROR;
	p->err = err;
	return err;
}

static int emit(MultipartParser *p, const char *buf, size_t len)
{
	if (len == 0 || !p->cb.part_data)
		return 0;
	return p->cb.part_data(p->cb.userdata, buf, len);
}

/*
 * The first place in buf that may start the delimiter: all of it, or as much of it as buf
 * holds at its end. A full match comes first when there is one (a partial one can only
 * start in the last dlen - 1 bytes); memmem() skips through binary data a stride at a
 * time, where stopping at each CR (one every 256 bytes or so) cost twice as much.
 */
static const char *next_candidate(const MultipartParser *p, const char *buf, size_t len)
{
	const char *end = buf + len, *s;

	s = memmem(buf, len, p->delim, p->dlen);
	if (s)
		return s;
	s = len >= p->dlen ? end - (p->dlen - 1) : buf;
	while ((s = memchr(s, '\r', (size_t)(end - s)))) {
		if (memcmp(s, p->delim, (size_t)(end - s)) == 0)
			return s;
		s++;
	}
	return NULL;
}

/*
 * Scan for the delimiter in the preamble or a part's data. The boundary holds
 * no CR, so after a mismatch a new match can only start at a CR: the bytes held
 * back so far are plain data. Returns bytes consumed; on a full match the state
 * moves to MP_AFTER_DELIM.
 */
static ssize_t scan(MultipartParser *p, const char *buf, size_t len, bool data)
{
	size_t i = 0;
	int r;

	while (i < len) {
		if (p->match == 0) {
			const char *cr = next_candidate(p, buf + i, len - i);
			size_t n = cr ? (size_t)(cr - (buf + i)) : len - i;

			if (data && (r = emit(p, buf + i, n)) < 0)
				return r;
			i += n;
			if (!cr)
				break;
			p->match = 1;
			i++;
			continue;
		}
		if (buf[i] == p->delim[p->match]) {
			i++;
			if (++p->match == p->dlen) {
				p->match = 0;
				p->from_data = data;
				p->padding = 0;
				p->state = MP_AFTER_DELIM;
				break;
			}
			continue;
		}
		/* Mismatch: what was held back is data; look at this byte again. */
		if (data && (r = emit(p, p->delim, p->match)) < 0)
			return r;
		p->match = 0;
	}
	return (ssize_t)i;
}

/* Text that looked like a delimiter was not one: give it back to the data. */
static int not_a_delimiter(MultipartParser *p, size_t dashes)
{
	int r;

	if (!p->from_data) {
		p->state = MP_PREAMBLE;
		return 0;
	}
	r = emit(p, p->delim, p->dlen);
	if (r >= 0 && dashes)
		r = emit(p, "-", 1);
	p->state = MP_DATA;
	return r;
}

/* The delimiter is real: the part before it, if any, is complete. */
static int delimiter_confirmed(MultipartParser *p)
{
	if (!p->in_part)
		return 0;
	p->in_part = false;
	return p->cb.part_end ? p->cb.part_end(p->cb.userdata) : 0;
}

static int start_headers(MultipartParser *p)
{
	if (p->parts >= p->max_parts)
		return -E2BIG;
	p->parts++;
	p->hlen = 0;
	p->state = MP_HEADERS;
	return 0;
}

/*
 * One byte after a delimiter. Returns 1 when it was consumed, 0 when it must be
 * looked at again in the new state, -errno on error.
 */
static int after_delimiter(MultipartParser *p, char c)
{
	int r;

	switch (p->state) {
	case MP_AFTER_DELIM:
		if (c == '-') {
			p->state = MP_AFTER_DASH;
			return 1;
		}
		if (c == ' ' || c == '\t' || c == '\r') {
			r = delimiter_confirmed(p);
			if (r < 0)
				return r;
			p->state = c == '\r' ? MP_DELIM_CR : MP_PADDING;
			p->padding = c == '\r' ? 0 : 1;
			return 1;
		}
		if (c == '\n') /* an LF-only line: refused, never guessed at */
			return -EBADMSG;
		r = not_a_delimiter(p, 0);
		return r < 0 ? r : 0;
	case MP_AFTER_DASH:
		if (c == '-') {
			r = delimiter_confirmed(p);
			if (r < 0)
				return r;
			p->state = MP_EPILOGUE;
			return 1;
		}
		r = not_a_delimiter(p, 1);
		return r < 0 ? r : 0;
	case MP_PADDING:
		if (c == ' ' || c == '\t') {
			if (++p->padding > PADDING_MAX)
				return -EBADMSG;
			return 1;
		}
		if (c != '\r')
			return -EBADMSG;
		p->state = MP_DELIM_CR;
		return 1;
	case MP_DELIM_CR:
		if (c != '\n')
			return -EBADMSG;
		r = start_headers(p);
		return r < 0 ? r : 1;
	default: return -EBADMSG;
	}
}

static const char *skip_ows(const char *s, const char *end)
{
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	return s;
}

static bool is_tspecial(char c)
{
	return strchr("()<>@,;:\\\"/[]?= \t", c) != NULL;
}

/* A token or a quoted-string (with backslash escapes) into out; returns the rest. */
static const char *param_value(const char *s, const char *end, char *out)
{
	size_t n = 0;

	if (s < end && *s == '"') {
		for (s++; s < end && *s != '"'; s++) {
			if (*s == '\\' && s + 1 < end)
				s++;
			out[n++] = *s;
		}
		if (s >= end)
			return NULL;
		out[n] = '\0';
		return s + 1;
	}
	while (s < end && !is_tspecial(*s) && (unsigned char)*s > 0x20)
		out[n++] = *s++;
	if (n == 0)
		return NULL;
	out[n] = '\0';
	return s;
}

/* Content-Disposition: form-data; name="x"; filename="y" (RFC 7578 section 4.2). */
static int parse_disposition(MultipartParser *p, const char *s, const char *end, bool *named)
{
	static const char form_data[] = "form-data";
	const size_t fdlen = sizeof(form_data) - 1;

	s = skip_ows(s, end);
	if ((size_t)(end - s) < fdlen || strncasecmp(s, form_data, fdlen) != 0)
		return -EBADMSG;
	s += fdlen;
	for (;;) {
		const char *key;
		size_t klen;
		char *out;

		s = skip_ows(s, end);
		if (s == end)
			return 0;
		if (*s != ';')
			return -EBADMSG;
		s = skip_ows(s + 1, end);
		if (s == end) /* a trailing ';' is harmless */
			return 0;
		key = s;
		while (s < end && !is_tspecial(*s))
			s++;
		klen = (size_t)(s - key);
		s = skip_ows(s, end);
		if (klen == 0 || s == end || *s != '=')
			return -EBADMSG;
		s = skip_ows(s + 1, end);
		if (klen == 4 && strncasecmp(key, "name", 4) == 0) {
			out = p->name;
			*named = true;
		} else if (klen == 8 && strncasecmp(key, "filename", 8) == 0) {
			out = p->filename;
			p->has_filename = true;
		} else {
			out = p->scratch; /* filename* and others: checked for syntax, dropped */
		}
		s = param_value(s, end, out);
		if (!s)
			return -EBADMSG;
	}
}

/*
 * The header block is complete (it ends with CRLF CRLF, or is a lone CRLF). Find
 * Content-Disposition; other headers (Content-Type...) are checked for syntax only.
 */
static int parse_headers(MultipartParser *p)
{
	const char *s = p->hdr, *end = p->hdr + p->hlen;
	bool seen = false, named = false;
	int r;

	while (s < end) {
		const char *eol = memchr(s, '\r', (size_t)(end - s));
		const char *colon;

		if (eol == s) /* the empty line */
			break;
		colon = memchr(s, ':', (size_t)(eol - s));
		if (!colon || colon == s || *s == ' ' || *s == '\t')
			return -EBADMSG;
		for (const char *k = s; k < colon; k++)
			if (is_tspecial(*k) || (unsigned char)*k <= 0x20 ||
			    (unsigned char)*k >= 0x7f)
				return -EBADMSG;
		if (colon - s == 19 && strncasecmp(s, "Content-Disposition", 19) == 0) {
			if (seen)
				return -EBADMSG;
			seen = true;
			r = parse_disposition(p, colon + 1, eol, &named);
			if (r < 0)
				return r;
		}
		s = eol + 2;
	}
	if (!seen || !named)
		return -EBADMSG;
	return 0;
}

/* Append one byte to the header block; parse it when the empty line arrives. */
static int header_byte(MultipartParser *p, char c)
{
	if (c == '\0')
		return -EBADMSG;
	if (p->hlen > 0 && p->hdr[p->hlen - 1] == '\r' && c != '\n')
		return -EBADMSG;
	if (c == '\n' && (p->hlen == 0 || p->hdr[p->hlen - 1] != '\r'))
		return -EBADMSG;
	if (p->hlen >= p->hmax)
		return -EMSGSIZE;
	p->hdr[p->hlen++] = c;
	if (c != '\n')
		return 0;
	if (!(p->hlen == 2 || (p->hlen >= 4 && memcmp(p->hdr + p->hlen - 4, "\r\n\r\n", 4) == 0)))
		return 0;
	return 1;
}

static int begin_part(MultipartParser *p)
{
	int r;

	p->name[0] = p->filename[0] = '\0';
	p->has_filename = false;
	r = parse_headers(p);
	if (r < 0)
		return r;
	p->in_part = true;
	p->state = MP_DATA;
	p->match = 0;
	if (!p->cb.part_begin)
		return 0;
	return p->cb.part_begin(p->cb.userdata, p->name, p->has_filename ? p->filename : NULL);
}

int multipart_feed(MultipartParser *p, const char *buf, size_t len)
{
	size_t i = 0;
	int r;

	if (p->state == MP_ERROR)
		return p->err;
	while (i < len) {
		ssize_t n;

		switch (p->state) {
		case MP_PREAMBLE:
		case MP_DATA:
			n = scan(p, buf + i, len - i, p->state == MP_DATA);
			if (n < 0)
				return fail(p, (int)n);
			i += (size_t)n;
			break;
		case MP_HEADERS:
			r = header_byte(p, buf[i++]);
			if (r < 0)
				return fail(p, r);
			if (r == 0)
				break;
			r = begin_part(p);
			if (r < 0)
				return fail(p, r);
			break;
		case MP_EPILOGUE: return 0;
		case MP_ERROR: return p->err;
		default:
			r = after_delimiter(p, buf[i]);
			if (r < 0)
				return fail(p, r);
			i += (size_t)r;
			break;
		}
	}
	return 0;
}

int multipart_finish(MultipartParser *p)
{
	if (p->state == MP_ERROR)
		return p->err;
	if (p->state != MP_EPILOGUE)
		return fail(p, -EPIPE);
	return 0;
}

int multipart_boundary_from_content_type(const char *ct, char *out, size_t outlen)
{
	static const char mfd[] = "multipart/form-data";
	const char *s = ct, *end = ct + strlen(ct);

	s = skip_ows(s, end);
	if ((size_t)(end - s) < sizeof(mfd) - 1 || strncasecmp(s, mfd, sizeof(mfd) - 1) != 0)
		return -EMEDIUMTYPE;
	s += sizeof(mfd) - 1;
	if (s < end && *s != ';' && *s != ' ' && *s != '\t')
		return -EMEDIUMTYPE;
	while (s < end) {
		_cleanup_free_ char *val = NULL;
		const char *key;
		size_t klen;

		s = skip_ows(s, end);
		if (s == end)
			break;
		if (*s != ';')
			return -EINVAL;
		s = skip_ows(s + 1, end);
		key = s;
		while (s < end && !is_tspecial(*s))
			s++;
		klen = (size_t)(s - key);
		s = skip_ows(s, end);
		if (klen == 0 || s == end || *s != '=')
			return -EINVAL;
		s = skip_ows(s + 1, end);
		val = malloc((size_t)(end - s) + 1);
		if (!val)
			return -ENOMEM;
		s = param_value(s, end, val);
		if (!s)
			return -EINVAL;
		if (klen == 8 && strncasecmp(key, "boundary", 8) == 0) {
			size_t vlen = strlen(val);

			if (vlen == 0 || vlen > MULTIPART_BOUNDARY_MAX || vlen >= outlen)
				return -EINVAL;
			for (size_t k = 0; k < vlen; k++)
				if (!boundary_char_ok((unsigned char)val[k]))
					return -EINVAL;
			memcpy(out, val, vlen + 1);
			return 0;
		}
	}
	return -EINVAL;
}
