/*
 * run/quarantine.c: which failures blame a host, and the rule that takes
 * a host out of the run (run.h; docs/DESIGN.md "Bad hosts").
 *
 * A trainer that exits 1 says nothing about its machine: a bug, a bad
 * flag or a lost peer end it the same on any host. What does point at
 * the machine is a fault the hardware raises (SIGSEGV, SIGBUS from a bad
 * page), a line its driver prints (an ECC or Xid error, which the user's
 * bad_host_pattern names), a hang there, or a failed preflight. One such
 * failure may be chance; the same host in 2 of the last 3 failures is
 * not, so the window counts every failure, blamed or not: a host blamed
 * twice among many unrelated failures stays.
 */
#include "run/run.h"

#include "run/spec_util.h"

#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int job_check_pattern(const char *pattern, struct err *e)
{
	regex_t re;
	char why[160];
	int rc;

	if (!*pattern)
		return err_set(e, COMMON_EINVAL,
			       "the bad-host pattern is empty: it would match "
			       "every line");
	rc = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB | REG_NEWLINE);
	if (rc) {
		regerror(rc, &re, why, sizeof(why));
		return err_set(e, COMMON_EINVAL,
			       "the bad-host pattern \"%.100s\" is not a POSIX "
			       "extended regular expression: %s", pattern,
			       why);
	}
	regfree(&re);
	return 0;
}

/* The first line of text pattern matches, cut into out; false none. */
static bool matching_line(const char *text, const char *pattern, char *out,
			  size_t cap)
{
	regex_t re;
	bool found = false;

	if (!text || !pattern || !*pattern ||
	    regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB | REG_NEWLINE))
		return false;
	for (const char *p = text; *p && !found;) {
		size_t len = strcspn(p, "\n");
		char *line = strndup(p, len);

		if (line && !regexec(&re, line, 0, NULL, 0)) {
			spec_copy_text(out, cap, line);
			found = true;
		}
		free(line);
		p += len + (p[len] == '\n');
	}
	regfree(&re);
	return found;
}

void cause_blame(struct gen_cause *c, const char *text, const char *pattern)
{
	/* A shell between the supervisor and a crashed trainer exits
	 * 128 + its signal. */
	int sig = c->signal ? c->signal
			    : c->exit_code > 128 && c->exit_code < 160
				      ? c->exit_code - 128 : 0;
	char line[sizeof(c->blame) - 5];

	c->blame[0] = '\0';
	if (c->cls == CAUSE_HANG)
		spec_copy_text(c->blame, sizeof(c->blame), "hang");
	else if (c->cls == CAUSE_PREFLIGHT)
		spec_copy_text(c->blame, sizeof(c->blame), "preflight");
	else if (c->cls != CAUSE_TRAINER)
		return;
	else if (matching_line(text, pattern, line, sizeof(line)))
		snprintf(c->blame, sizeof(c->blame), "log: %s", line);
	else if (sig == SIGSEGV)
		spec_copy_text(c->blame, sizeof(c->blame), "SIGSEGV");
	else if (sig == SIGBUS)
		spec_copy_text(c->blame, sizeof(c->blame), "SIGBUS");
}

bool quarantine_has(const struct control *c, const char *host)
{
	for (unsigned i = 0; i < c->nquarantined; i++)
		if (!strcmp(c->quarantined[i].host, host))
			return true;
	return false;
}

static bool is_failure(const struct gen_cause *cause)
{
	return cause->cls == CAUSE_TRAINER || cause->cls == CAUSE_HANG ||
	       cause->cls == CAUSE_PREFLIGHT;
}

bool quarantine_note(struct control *c, const struct gen_cause *cause)
{
	struct host_blame b = { .generation = c->generation };
	unsigned hits = 0;

	c->quarantined_now = false;
	if (!is_failure(cause))
		return false;
	if (cause->blame[0] && cause->host[0]) {
		spec_copy_text(b.host, sizeof(b.host), cause->host);
		spec_copy_text(b.why, sizeof(b.why), cause->blame);
	}
	spec_copy_text(b.worker, sizeof(b.worker), cause->worker);
	if (c->nfailures == QUARANTINE_WINDOW)
		memmove(c->failures, c->failures + 1,
			(QUARANTINE_WINDOW - 1) * sizeof(*c->failures));
	else
		c->nfailures++;
	c->failures[c->nfailures - 1] = b;
	if (!b.host[0] || quarantine_has(c, b.host) ||
	    c->nquarantined == QUARANTINE_MAX)
		return false;
	for (unsigned i = 0; i < c->nfailures; i++)
		hits += !strcmp(c->failures[i].host, b.host);
	if (hits < QUARANTINE_HITS)
		return false;
	c->quarantined[c->nquarantined++] = b;
	c->quarantined_now = true;
	return true;
}
