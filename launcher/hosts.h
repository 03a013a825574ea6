/*
 * hosts.h (private to launcher/): the host options that `run` and `push`
 * share, and the host list built from them: the SSH hosts a fan-out runs
 * on (not a run's target, target.h).
 */
#ifndef SLICECTL_LAUNCHER_HOSTS_H
#define SLICECTL_LAUNCHER_HOSTS_H

#include "common/common.h"
#include "ssh/fanout.h"

struct host_options {
	struct strlist host_files;
	struct strlist hosts;
	struct strlist env;
	const char *user;
	unsigned port;
	const char *identity;
	const char *known_hosts;
	int policy;
	unsigned concurrency;
	unsigned connect_timeout_ms;
	unsigned timeout_ms;
	unsigned keepalive_ms;
	unsigned retries;
	const char *log_dir;
	bool fail_fast;
	bool verbose;
	int format; /* 0 text, 1 json */
	const char *tpu;      /* the workers of this queued resource */
	const char *project;
	const char *zone;
	bool external_ip;
};

extern const char *const hostkey_policy_names[];
extern const char *const format_names[];

/* Fills opts[0..HOST_OPTIONS_COUNT-1] with the shared options, bound to ho;
 * a command appends its own and the terminating { 0 }. */
#define HOST_OPTIONS_COUNT 21
void host_options_table(struct host_options *ho, struct opt *opts);

void host_options_init(struct host_options *ho);

/* Parses a command's arguments into ho and pos. Returns -1 when the
 * command should go on, or the exit status it should end with: 0 after
 * printing usage for --help, EXIT_USAGE after saying what was wrong. */
int host_options_parse(struct host_options *ho, int argc, char **argv,
		       const char *usage, bool stop_at_first_positional,
		       struct strlist *pos);
void host_options_release(struct host_options *ho);

struct host_list {
	struct fanout_target *v;
	size_t n;
	struct strlist strings; /* owns every string the hosts point to */
	char ***envs;           /* per-host env arrays */
	/* What the hosts' source decided instead of the defaults (--tpu:
	 * slicectl's key and known_hosts); NULL to keep the options'. */
	const char *identity;
	const char *known_hosts;
};

void host_list_init(struct host_list *t);
void host_list_release(struct host_list *t);

/* Builds the list from --hosts and --host, applying --user, --port and
 * --env, and SLICE_PROCESS_ID / SLICE_NUM_PROCESSES for each host. */
int host_list_build(struct host_list *t, const struct host_options *ho,
		    struct err *e);

/* Keeps a copy of s in t->strings; *out points to it. */
int host_list_keep(struct host_list *t, const char *s, const char **out);

/* --tpu NAME: every worker of the queued resource, in slice and worker
 * order, with the SLICE_* variables; their host keys, from the TPU API's
 * guest attributes, written into slicectl's known_hosts first. */
int tpu_hosts_build(struct host_list *t, const struct host_options *ho,
		    struct err *e);

/* Parses "[USER@]HOST[:PORT]" ("[v6addr]:port" too). */
int host_spec_parse(const char *spec, char **user, char **host,
		    unsigned *port, struct err *e);

/* Fills a fanout config from the options (command and input are left). */
void host_options_config(const struct host_options *ho,
			 struct fanout_config *c);

#endif
