/*
 * gke_nokube.c: the GKE target's cluster calls while kube/ (the
 * Kubernetes client) is not in the tree yet: --render works, reaching a
 * cluster says why it cannot.
 */
#include "launcher/gke.h"
#include "launcher/launcher.h"
#include "launcher/target.h"

#include <string.h>

void gke_conn_init(struct gke_conn *c)
{
	memset(c, 0, sizeof(*c));
}

void gke_conn_release(struct gke_conn *c)
{
	gke_conn_init(c);
}

static int no_client(struct err *e)
{
	return err_set(e, COMMON_EIO, "this slicectl is built without the "
				      "Kubernetes client");
}

int gke_connect(const char *cluster, const char *location, const char *project,
		const char *kubeconfig, const char *context,
		struct gke_conn *out, struct err *e)
{
	(void)cluster, (void)location, (void)project, (void)kubeconfig;
	(void)context, (void)out;
	return no_client(e);
}

int gke_exit_status(const struct err *e)
{
	log_error("%s", e->msg);
	return e->code == COMMON_EUSAGE ? EXIT_USAGE : 1;
}

int gke_preflight(struct gke_conn *c, const struct gke_spec *s)
{
	(void)c, (void)s;
	return 1;
}

int gke_submit(struct gke_conn *c, const struct gke_spec *s, json_t *js,
	       const char *run_url)
{
	(void)c, (void)s, (void)js, (void)run_url;
	return 1;
}

int gke_describe(const struct job_target *t, struct target_view *out,
		 struct err *e)
{
	(void)t, (void)out;
	return no_client(e);
}

int gke_delete(const struct job_target *t, bool wait, unsigned timeout_ms,
	       bool *absent, struct err *e)
{
	(void)t, (void)wait, (void)timeout_ms, (void)absent;
	return no_client(e);
}
