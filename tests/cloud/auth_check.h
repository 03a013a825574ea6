/*
 * tests/cloud/auth_check.h: what the token source tests share: a private
 * home directory with no credentials in it and no metadata server, a fast
 * HTTP client, and files and RSA keys made there, each failing the
 * current Criterion test.
 */
#ifndef SLICECTL_TESTS_AUTH_CHECK_H
#define SLICECTL_TESTS_AUTH_CHECK_H

#include "cloud/cloud.h"

/* The test's directory, also its HOME, made by auth_setup. */
extern char auth_dir[];

/* Makes auth_dir and clears every credential setting: a suite's .init. */
void auth_setup(void);
/* Removes auth_dir: a suite's .fini. */
void auth_teardown(void);
/* c with short backoff and timeouts. */
void fast_client(struct http_client *c);
void write_text(const char *path, const char *text);
/* Makes DIR/NAME.pem (private) and DIR/NAME.pub.pem; returns the PEM. */
char *make_key(const char *name);

#endif
