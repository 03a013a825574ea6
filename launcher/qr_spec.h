/*
 * qr_spec.h (private to launcher/): the one place a queued resource's spec
 * is finished from the flags `slicectl create` and `slicectl job` share:
 * the capacity (the older flags against --provisioning-model), the
 * durations, the startup script and slicectl's key in ssh-keys. The
 * commands fill the fields of tpu_qr_spec they take as given (id, type,
 * runtime, node count, network, labels, metadata) themselves.
 */
#ifndef SLICECTL_LAUNCHER_QR_SPEC_H
#define SLICECTL_LAUNCHER_QR_SPEC_H

#include "cloud/cloud.h"

struct qr_flags {
	const char *provisioning_model; /* NULL: not given */
	bool spot, reserved, best_effort;
	/* The command has --reservation (s->reservation), so its messages
	 * name it; --reservation with --reserved is one choice. */
	bool reservation_flag;
	/* Milliseconds as opt.c parses them; the API takes whole seconds. */
	unsigned max_run_ms, valid_until_ms, valid_after_ms;
	const char *startup_script; /* its text; NULL: none */
	bool no_ssh_key;
	/* ssh-keys' login; NULL: default_remote_user (common.h). */
	const char *user;
	/* The private key whose public half goes into ssh-keys; NULL:
	 * slicectl's own (SLICECTL_HOME/id_ed25519, made on first use). */
	const char *identity;
};

/* Sets s's capacity and durations from f and makes every check that needs
 * no server (tpu_qr_spec_check): COMMON_EUSAGE with the reason. A command
 * that must refuse before it writes anything calls this first. */
int qr_spec_capacity(struct tpu_qr_spec *s, const struct qr_flags *f,
		     struct err *e);

/* qr_spec_capacity, then appends metadata startup-script (f's) and
 * ssh-keys: any ssh-keys value s already has, a newline, and "USER:KEY"
 * for f's key (an RSA key is warned about: this libssh2 signs RSA only
 * with SHA-1). COMMON_EUSAGE or COMMON_ENOMEM, or the key's error. */
int qr_spec_build(struct tpu_qr_spec *s, const struct qr_flags *f,
		  struct err *e);

/* Appends metadata "KEY=VALUE" to s. */
int qr_spec_metadata(struct tpu_qr_spec *s, const char *key,
		     const char *value, struct err *e);

#endif
