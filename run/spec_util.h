/*
 * run/spec_util.h (private to run/): the small text helpers that
 * control.json and the status objects share, so that both cut strings
 * the same way.
 */
#ifndef SLICECTL_RUN_SPEC_UTIL_H
#define SLICECTL_RUN_SPEC_UTIL_H

#include "common/common.h"

#include <stdbool.h>
#include <stddef.h>

/* Copies src (NULL: "") into dst[cap], cut at a UTF-8 character boundary
 * when too long. */
void spec_copy_text(char *dst, size_t cap, const char *src);

/* Whether s is one of words[0..n). */
bool spec_one_of(const char *s, const char *const *words, size_t n);

/* Appends ",\n  \"key\": " and value as a JSON string: a member after the
 * first of the two-space-indented objects written for the store. */
int spec_append_text(struct buf *b, const char *key, const char *value);

#endif
