/*
 * qr_spec.c: see qr_spec.h.
 */
#include "launcher/qr_spec.h"
#include "launcher/launcher.h"
#include "launcher/tpu_options.h"
#include "ssh/fanout.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* opt.c's milliseconds in whole seconds, or a usage error naming flag. */
static int whole_seconds(unsigned ms, const char *flag, uint64_t *out,
			 struct err *e)
{
	if (ms % 1000)
		return err_set(e, COMMON_EUSAGE,
			       "%s %u.%03us: durations take whole seconds",
			       flag, ms / 1000, ms % 1000);
	*out = ms / 1000;
	return 0;
}

int qr_spec_capacity(struct tpu_qr_spec *s, const struct qr_flags *f,
		     struct err *e)
{
	bool reserved = f->reserved || s->reservation;
	int rc, modes = f->spot + reserved + f->best_effort;

	if (modes > 1)
		return err_set(e, COMMON_EUSAGE,
			       "choose one of --spot, --reserved%s and "
			       "--best-effort", f->reservation_flag
			       ? " (or --reservation)" : "");
	s->capacity = f->spot	     ? TPU_CAPACITY_SPOT
		      : reserved     ? TPU_CAPACITY_RESERVED
		      : f->best_effort ? TPU_CAPACITY_BEST_EFFORT
				       : TPU_CAPACITY_ON_DEMAND;
	rc = tpu_capacity_choose(f->provisioning_model, s->capacity,
				 f->spot	   ? "--spot"
				 : s->reservation  ? "--reservation"
				 : f->reserved	   ? "--reserved"
				 : f->best_effort  ? "--best-effort"
						   : NULL,
				 &s->capacity, e);
	if (!rc)
		rc = whole_seconds(f->max_run_ms, "--max-run-duration",
				   &s->max_run_duration_s, e);
	if (!rc)
		rc = whole_seconds(f->valid_until_ms, "--valid-until-duration",
				   &s->valid_until_s, e);
	if (!rc)
		rc = whole_seconds(f->valid_after_ms, "--valid-after-duration",
				   &s->valid_after_s, e);
	if (!rc)
		rc = tpu_qr_spec_check(s, e);
	/* The cloud's CLOUD_EINVAL here is a bad flag like the others. */
	if (rc && e->code != COMMON_ENOMEM)
		e->code = COMMON_EUSAGE;
	return rc ? e->code : 0;
}

int qr_spec_metadata(struct tpu_qr_spec *s, const char *key,
		     const char *value, struct err *e)
{
	struct buf kv;
	int rc;

	buf_init(&kv);
	rc = buf_appendf(&kv, "%s=%s", key, value) ||
	     strlist_push(&s->metadata, kv.data);
	buf_release(&kv);
	return rc ? err_set(e, COMMON_ENOMEM, "out of memory") : 0;
}

/* The last ssh-keys value s holds (the body keeps the last of a repeated
 * key), or NULL. */
static const char *given_ssh_keys(const struct tpu_qr_spec *s)
{
	const char *given = NULL;

	for (size_t i = 0; i < s->metadata.n; i++)
		if (!strncmp(s->metadata.v[i], "ssh-keys=", 9))
			given = s->metadata.v[i] + 9;
	return given;
}

static int add_ssh_key(struct tpu_qr_spec *s, const struct qr_flags *f,
		       struct err *e)
{
	char me[USER_NAME_MAX];
	const char *user = f->user, *given = given_ssh_keys(s);
	struct buf path, kv;
	char *pub = NULL;
	int rc;

	if (!user) {
		default_remote_user(me, sizeof(me));
		user = me;
	}
	buf_init(&path);
	buf_init(&kv);
	if (f->identity) {
		if (access(f->identity, R_OK))
			return err_errno(e, COMMON_EUSAGE, errno,
					 "cannot read --identity %s",
					 f->identity);
		rc = buf_appends(&path, f->identity)
			     ? err_set(e, COMMON_ENOMEM, "out of memory")
			     : 0;
	} else {
		rc = slicectl_home_path(&path, "id_ed25519", e);
	}
	if (!rc)
		rc = fanout_key_ensure(path.data, "slicectl", &pub, e);
	if (!rc && !strncmp(pub, "ssh-rsa ", 8))
		log_warn("%s is an RSA key: this libssh2 signs RSA only with "
			 "SHA-1, which the workers' sshd refuses; use an "
			 "ed25519 key (or none: slicectl makes one)",
			 path.data);
	/* given points into s->metadata, which the push may move: kv is
	 * made before it. */
	if (!rc && (buf_appendf(&kv, "ssh-keys=%s%s%s:%s", given ? given : "",
				given && *given ? "\n" : "", user, pub) ||
		    strlist_push(&s->metadata, kv.data)))
		rc = err_set(e, COMMON_ENOMEM, "out of memory");
	free(pub);
	buf_release(&path);
	buf_release(&kv);
	return rc;
}

int qr_spec_build(struct tpu_qr_spec *s, const struct qr_flags *f,
		  struct err *e)
{
	int rc = qr_spec_capacity(s, f, e);

	if (!rc && f->startup_script)
		rc = qr_spec_metadata(s, "startup-script", f->startup_script,
				      e);
	if (!rc && !f->no_ssh_key)
		rc = add_ssh_key(s, f, e);
	return rc;
}
