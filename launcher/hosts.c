/*
 * hosts.c: from --hosts files and --host flags to the host list the
 * fan-out runs on. A hosts file has one host per line,
 *     [USER@]HOST[:PORT] [NAME=VALUE ...]     # comment
 * where values may be 'single' or "double" quoted; the per-host variables
 * override --env.
 */
#include "launcher/hosts.h"
#include "launcher/launcher.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const hostkey_policy_names[] = { "yes", "accept-new", "no",
					     NULL };
const char *const format_names[] = { "text", "json", NULL };

void host_options_init(struct host_options *ho)
{
	memset(ho, 0, sizeof(*ho));
	strlist_init(&ho->host_files);
	strlist_init(&ho->hosts);
	strlist_init(&ho->env);
	ho->concurrency = 64;
	ho->connect_timeout_ms = 30000;
	ho->keepalive_ms = 15000;
	ho->retries = 3;
}

void host_options_table(struct host_options *ho, struct opt *opts)
{
	const struct opt table[HOST_OPTIONS_COUNT] = {
		{ .name = "hosts", .kind = OPT_LIST, .value = &ho->host_files,
		  .arg = "FILE",
		  .help = "hosts, one a line: [USER@]HOST[:PORT] [NAME=VALUE...]" },
		{ .name = "host", .short_name = 'H', .kind = OPT_LIST,
		  .value = &ho->hosts, .arg = "[USER@]HOST[:PORT]",
		  .help = "a host (repeatable)" },
		{ .name = "user", .short_name = 'l', .kind = OPT_STRING,
		  .value = &ho->user, .arg = "USER",
		  .help = "login user where a host names none (default: you)" },
		{ .name = "port", .short_name = 'p', .kind = OPT_UINT,
		  .value = &ho->port, .arg = "PORT", .min = 1, .max = 65535,
		  .help = "port where a host names none (default 22)" },
		{ .name = "identity", .short_name = 'i', .kind = OPT_STRING,
		  .value = &ho->identity, .arg = "KEY",
		  .help = "private key (default: ssh-agent, then ~/.ssh/id_*)" },
		{ .name = "known-hosts", .kind = OPT_STRING,
		  .value = &ho->known_hosts, .arg = "FILE",
		  .help = "known_hosts file (default ~/.ssh/known_hosts)" },
		{ .name = "strict-host-key-checking", .kind = OPT_CHOICE,
		  .value = &ho->policy, .arg = "yes|accept-new|no",
		  .choices = hostkey_policy_names,
		  .help = "unknown host keys: refuse (yes, the default) or add "
			  "them; a changed key is always refused" },
		{ .name = "connect-concurrency", .short_name = 'f',
		  .kind = OPT_UINT, .value = &ho->concurrency, .arg = "N",
		  .min = 1, .max = 65535,
		  .help = "handshakes in flight at once, at most (default 64; "
			  "fewer while servers drop or delay them); started "
			  "commands never wait for each other" },
		{ .name = "connect-timeout", .kind = OPT_SECONDS,
		  .value = &ho->connect_timeout_ms, .arg = "S",
		  .help = "give up on a host not logged in after S seconds "
			  "(default 30)" },
		{ .name = "timeout", .short_name = 't', .kind = OPT_SECONDS,
		  .value = &ho->timeout_ms, .arg = "S",
		  .help = "end commands still running after S seconds "
			  "(default: never)" },
		{ .name = "keepalive", .kind = OPT_SECONDS,
		  .value = &ho->keepalive_ms, .arg = "S",
		  .help = "keepalive interval, 2 or more; a host silent for 4 "
			  "intervals is lost (default 15, 0: off)" },
		{ .name = "retries", .kind = OPT_UINT, .value = &ho->retries,
		  .arg = "N", .min = 0, .max = 100,
		  .help = "reconnects when refused, reset or dropped, or when "
			  "the SSH handshake times out, before login "
			  "(default 3)" },
		{ .name = "env", .short_name = 'e', .kind = OPT_LIST,
		  .value = &ho->env, .arg = "NAME=VALUE",
		  .help = "export to every command (repeatable)" },
		{ .name = "log-dir", .kind = OPT_STRING, .value = &ho->log_dir,
		  .arg = "DIR",
		  .help = "also write each host's output to DIR/HOST.log" },
		{ .name = "fail-fast", .kind = OPT_FLAG, .value = &ho->fail_fast,
		  .help = "on the first failed host, end the commands on all "
			  "the others" },
		{ .name = "format", .kind = OPT_CHOICE, .value = &ho->format,
		  .arg = "text|json", .choices = format_names,
		  .help = "json: one JSON object a line (lines, hosts, summary)" },
		{ .name = "verbose", .short_name = 'v', .kind = OPT_FLAG,
		  .value = &ho->verbose,
		  .help = "log every host's connection states" },
		{ .name = "tpu", .kind = OPT_STRING, .value = &ho->tpu,
		  .arg = "NAME",
		  .help = "every worker of queued resource NAME, host keys "
			  "checked against the TPU API's record" },
		{ .name = "project", .kind = OPT_STRING, .value = &ho->project,
		  .arg = "PROJECT",
		  .help = "with --tpu (default: $CLOUDSDK_CORE_PROJECT)" },
		{ .name = "zone", .kind = OPT_STRING, .value = &ho->zone,
		  .arg = "ZONE",
		  .help = "with --tpu (default: $CLOUDSDK_COMPUTE_ZONE)" },
		{ .name = "external-ip", .kind = OPT_FLAG,
		  .value = &ho->external_ip,
		  .help = "with --tpu, reach workers on their external IPs" },
	};

	memcpy(opts, table, sizeof(table));
}

int host_options_parse(struct host_options *ho, int argc, char **argv,
		       const char *usage, bool stop_at_first_positional,
		       struct strlist *pos)
{
	struct opt opts[HOST_OPTIONS_COUNT + 1] = { 0 };

	char name[64];

	host_options_table(ho, opts);
	snprintf(name, sizeof(name), "slicectl %s", argv[0]);
	return opt_parse_command(opts, argc, argv, name, usage,
				 stop_at_first_positional, pos);
}

void host_options_release(struct host_options *ho)
{
	strlist_release(&ho->host_files);
	strlist_release(&ho->hosts);
	strlist_release(&ho->env);
}

void host_options_config(const struct host_options *ho,
			 struct fanout_config *c)
{
	c->identity = ho->identity;
	c->known_hosts = ho->known_hosts;
	c->policy = (enum fanout_hostkey_policy)ho->policy;
	c->connect_concurrency = ho->concurrency;
	c->connect_timeout_ms = ho->connect_timeout_ms;
	c->command_timeout_ms = ho->timeout_ms;
	c->keepalive_ms = ho->keepalive_ms;
	c->retries = ho->retries;
	c->fail_fast = ho->fail_fast;
}

void host_list_init(struct host_list *t)
{
	memset(t, 0, sizeof(*t));
	strlist_init(&t->strings);
}

void host_list_release(struct host_list *t)
{
	for (size_t i = 0; t->envs && i < t->n; i++)
		free(t->envs[i]);
	free(t->envs);
	free(t->v);
	strlist_release(&t->strings);
	host_list_init(t);
}

int host_spec_parse(const char *spec, char **user, char **host,
		    unsigned *port, struct err *e)
{
	const char *at = strrchr(spec, '@');
	const char *h = at ? at + 1 : spec;
	const char *end, *colon = NULL;

	*user = NULL;
	*host = NULL;
	*port = 0;
	if (at && at == spec)
		return err_set(e, COMMON_EUSAGE, "'%s': empty user name", spec);
	if (*h == '[') {
		end = strchr(h, ']');
		if (!end || (end[1] && end[1] != ':'))
			return err_set(e, COMMON_EUSAGE,
				       "'%s': want [ADDRESS]:PORT", spec);
		colon = end[1] ? end + 1 : NULL;
		h++;
	} else {
		colon = strchr(h, ':');
		if (colon && strchr(colon + 1, ':'))
			return err_set(e, COMMON_EUSAGE,
				       "'%s': write IPv6 addresses as [ADDRESS] "
				       "or [ADDRESS]:PORT", spec);
		end = colon ? colon : h + strlen(h);
	}
	if (end == h)
		return err_set(e, COMMON_EUSAGE, "'%s': no host name", spec);
	if (colon) {
		char *stop;
		unsigned long p;

		errno = 0;
		p = strtoul(colon + 1, &stop, 10);
		if (errno || *stop || stop == colon + 1 || p < 1 || p > 65535)
			return err_set(e, COMMON_EUSAGE,
				       "'%s': port must be 1 to 65535", spec);
		*port = (unsigned)p;
	}
	*host = strndup(h, (size_t)(end - h));
	if (at)
		*user = strndup(spec, (size_t)(at - spec));
	if (!*host || (at && !*user)) {
		free(*host);
		free(*user);
		return err_set(e, COMMON_ENOMEM, "out of memory");
	}
	return 0;
}

/* One host as parsed, before defaults are applied. */
struct entry {
	char *user;
	char *host;
	unsigned port;
	struct strlist env;
};

struct entries {
	struct entry *v;
	size_t n, cap;
};

static void entries_release(struct entries *es)
{
	for (size_t i = 0; i < es->n; i++) {
		free(es->v[i].user);
		free(es->v[i].host);
		strlist_release(&es->v[i].env);
	}
	free(es->v);
}

static int check_env(const char *kv, const char *where, struct err *e)
{
	const char *eq = strchr(kv, '=');

	if (!eq || !env_name_valid(kv, (size_t)(eq - kv)))
		return err_set(e, COMMON_EUSAGE,
			       "%s: '%s' is not NAME=VALUE with NAME made of "
			       "letters, digits and _", where, kv);
	return 0;
}

static int entries_add(struct entries *es, const char *spec,
		       const char *where, struct err *e)
{
	struct entry *en;
	int rc;

	if (es->n == es->cap) {
		size_t cap = es->cap ? es->cap * 2 : 64;
		struct entry *v = realloc(es->v, cap * sizeof(*v));

		if (!v)
			return err_set(e, COMMON_ENOMEM, "out of memory");
		es->v = v;
		es->cap = cap;
	}
	en = &es->v[es->n];
	memset(en, 0, sizeof(*en));
	strlist_init(&en->env);
	rc = host_spec_parse(spec, &en->user, &en->host, &en->port, e);
	if (rc) {
		err_prefix(e, "%s", where);
		return rc;
	}
	es->n++;
	return 0;
}

/* Splits a hosts-file line into words, honouring quotes and comments. */
static int split_words(const char *line, struct strlist *words,
		       const char *where, struct err *e)
{
	struct buf w;
	const char *p = line;
	int rc = 0;

	buf_init(&w);
	while (*p && !rc) {
		bool any = false;

		while (*p == ' ' || *p == '\t' || *p == '\r')
			p++;
		if (!*p || *p == '#')
			break;
		buf_reset(&w);
		while (*p && *p != ' ' && *p != '\t' && *p != '\r' && !rc) {
			char q = *p;

			any = true;
			if (q == '\'' || q == '"') {
				const char *close = ++p;

				while (*close && *close != q) {
					if (q == '"' && *close == '\\' &&
					    close[1])
						close++;
					close++;
				}
				if (!*close) {
					rc = err_set(e, COMMON_EUSAGE,
						     "%s: unterminated %c quote",
						     where, q);
					break;
				}
				for (; p < close; p++) {
					if (q == '"' && *p == '\\')
						p++;
					rc = buf_append(&w, p, 1);
				}
				p = close + 1;
			} else {
				rc = buf_append(&w, p++, 1);
			}
		}
		if (!rc && any)
			rc = strlist_push(words, w.data ? w.data : "");
	}
	buf_release(&w);
	return rc;
}

static int read_hosts_file(struct entries *es, const char *path,
			   struct err *e)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
	char *line = NULL;
	size_t cap = 0;
	unsigned lineno = 0;
	struct stat st;
	int rc = 0;

	if (!f)
		return err_errno(e, COMMON_EUSAGE, errno,
				 "cannot read hosts file %s", path);
	/* A directory opens for reading and fails only at the first read. */
	if (!fstat(fileno(f), &st) && S_ISDIR(st.st_mode)) {
		fclose(f);
		return err_set(e, COMMON_EUSAGE,
			       "hosts file %s is a directory: name a file of "
			       "hosts, one a line", path);
	}
	while (!rc && getline(&line, &cap, f) >= 0) {
		struct strlist words;
		char where[600];

		lineno++;
		line[strcspn(line, "\n")] = '\0';
		snprintf(where, sizeof(where), "%s:%u", path, lineno);
		strlist_init(&words);
		rc = split_words(line, &words, where, e);
		if (!rc && words.n) {
			rc = entries_add(es, words.v[0], where, e);
			for (size_t i = 1; !rc && i < words.n; i++) {
				rc = check_env(words.v[i], where, e);
				if (!rc)
					rc = strlist_push(&es->v[es->n - 1].env,
							  words.v[i]);
			}
		}
		strlist_release(&words);
	}
	if (!rc && ferror(f))
		rc = err_errno(e, COMMON_EIO, errno, "reading %s", path);
	free(line);
	if (f != stdin)
		fclose(f);
	return rc;
}

/* The label output uses: the host alone where that is unique. */
static int make_label(struct host_list *t, const struct entries *es, size_t i,
		      unsigned port, const char **label)
{
	bool dup = false;
	char buf[600];

	for (size_t j = 0; j < es->n && !dup; j++)
		dup = j != i && !strcmp(es->v[j].host, es->v[i].host);
	if (!dup)
		snprintf(buf, sizeof(buf), "%s", es->v[i].host);
	else if (strchr(es->v[i].host, ':'))
		snprintf(buf, sizeof(buf), "[%s]:%u", es->v[i].host, port);
	else
		snprintf(buf, sizeof(buf), "%s:%u", es->v[i].host, port);
	for (size_t j = 0; j < i; j++)
		if (!strcmp(t->v[j].label, buf)) {
			size_t len = strlen(buf);
			snprintf(buf + len, sizeof(buf) - len, "#%zu", i);
			break;
		}
	if (strlist_push(&t->strings, buf))
		return COMMON_ENOMEM;
	*label = t->strings.v[t->strings.n - 1];
	return 0;
}

int host_list_keep(struct host_list *t, const char *s, const char **out)
{
	if (strlist_push(&t->strings, s))
		return COMMON_ENOMEM;
	*out = t->strings.v[t->strings.n - 1];
	return 0;
}

/* Environment of host i: SLICE_* first, then --env, then the hosts file,
 * later values winning because later exports override earlier ones. */
static int build_env(struct host_list *t, const struct host_options *ho,
		     const struct entry *en, size_t i, size_t n)
{
	size_t count = 2 + ho->env.n + en->env.n, k = 0;
	char **env = calloc(count, sizeof(*env));
	char kv[64];
	const char *s;

	if (!env)
		return COMMON_ENOMEM;
	t->envs[i] = env;
	snprintf(kv, sizeof(kv), "SLICE_PROCESS_ID=%zu", i);
	if (host_list_keep(t, kv, &s))
		return COMMON_ENOMEM;
	env[k++] = (char *)s;
	snprintf(kv, sizeof(kv), "SLICE_NUM_PROCESSES=%zu", n);
	if (host_list_keep(t, kv, &s))
		return COMMON_ENOMEM;
	env[k++] = (char *)s;
	for (size_t j = 0; j < ho->env.n; j++)
		env[k++] = ho->env.v[j];
	for (size_t j = 0; j < en->env.n; j++) {
		if (host_list_keep(t, en->env.v[j], &s))
			return COMMON_ENOMEM;
		env[k++] = (char *)s;
	}
	t->v[i].env = env;
	t->v[i].nenv = k;
	return 0;
}

static int fill(struct host_list *t, const struct host_options *ho,
		const struct entries *es, struct err *e)
{
	char me[USER_NAME_MAX];
	const char *user = ho->user;

	if (!user || !*user) {
		default_remote_user(me, sizeof(me));
		user = me;
	}

	t->v = calloc(es->n, sizeof(*t->v));
	t->envs = calloc(es->n, sizeof(*t->envs));
	if (!t->v || !t->envs)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	t->n = es->n;
	for (size_t i = 0; i < es->n; i++) {
		const struct entry *en = &es->v[i];
		struct fanout_target *ft = &t->v[i];

		ft->port = en->port ? en->port : ho->port ? ho->port : 22;
		if (host_list_keep(t, en->user ? en->user : user, &ft->user) ||
		    host_list_keep(t, en->host, &ft->host) ||
		    make_label(t, es, i, ft->port, &ft->label) ||
		    build_env(t, ho, en, i, es->n))
			return err_set(e, COMMON_ENOMEM, "out of memory");
	}
	return 0;
}

/* What the option table cannot check by itself. */
static int check_options(const struct host_options *ho, struct err *e)
{
	struct stat st;

	/* libssh2 counts keepalives in whole seconds and turns 1 into 2. */
	if (ho->keepalive_ms && ho->keepalive_ms < 2000)
		return err_set(e, COMMON_EUSAGE,
			       "--keepalive must be 2 seconds or more (or 0 "
			       "for none)");
	if (ho->log_dir && !stat(ho->log_dir, &st) && !S_ISDIR(st.st_mode))
		return err_set(e, COMMON_EUSAGE,
			       "--log-dir %s is not a directory: name a "
			       "directory (it is created when missing)",
			       ho->log_dir);
	return 0;
}

int host_list_build(struct host_list *t, const struct host_options *ho,
		    struct err *e)
{
	struct entries es = { 0 };
	int rc = check_options(ho, e);

	for (size_t i = 0; !rc && i < ho->env.n; i++)
		rc = check_env(ho->env.v[i], "--env", e);
	if (!rc && ho->tpu) {
		if (ho->host_files.n || ho->hosts.n)
			return err_set(e, COMMON_EUSAGE,
				       "--tpu names the hosts: leave out "
				       "--hosts and --host");
		return tpu_hosts_build(t, ho, e);
	}
	if (!rc && (ho->project || ho->zone || ho->external_ip))
		rc = err_set(e, COMMON_EUSAGE,
			     "--project, --zone and --external-ip go with "
			     "--tpu NAME");
	for (size_t i = 0; !rc && i < ho->host_files.n; i++)
		rc = read_hosts_file(&es, ho->host_files.v[i], e);
	for (size_t i = 0; !rc && i < ho->hosts.n; i++)
		rc = entries_add(&es, ho->hosts.v[i], "--host", e);
	if (!rc && !es.n)
		rc = err_set(e, COMMON_EUSAGE,
			     "no hosts: give --hosts FILE or --host HOST");
	if (!rc)
		rc = fill(t, ho, &es, e);
	entries_release(&es);
	return rc;
}
