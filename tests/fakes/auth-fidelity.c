/*
 * auth-fidelity.c: slicectl's side of the 'auth-fidelity' test. Gets one
 * access token the way slicectl does (auth_init, then auth_token, from
 * GOOGLE_APPLICATION_CREDENTIALS and the SLICECTL_*_ENDPOINT overrides)
 * and prints it, so auth-fidelity.sh can compare what slicectl sent to
 * the fakes with what Google's own client sent for the same file. Only
 * for the fakes' tokens: a real one must never be printed.
 */
#include "cloud/auth.h"

#include <stdio.h>

int main(void)
{
	struct http_policy p;
	struct http_client c;
	struct auth a;
	const char *tok;
	struct err e;
	int rc;

	err_init(&e);
	http_policy_default(&p);
	if (http_client_init(&c, &p, &e)) {
		fprintf(stderr, "auth-fidelity: %s\n", e.msg);
		return 1;
	}
	rc = auth_init(&a, &e);
	if (!rc) {
		rc = auth_token(&a, &c, &tok, &e);
		if (!rc)
			printf("%s\n", tok);
		auth_release(&a);
	}
	http_client_release(&c);
	if (rc)
		fprintf(stderr, "auth-fidelity: %s\n", e.msg);
	return rc ? 1 : 0;
}
