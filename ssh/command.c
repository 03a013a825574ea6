/*
 * command.c: per-host environment travels inside the command itself, as
 * exports in front of it, because sshd refuses most "env" requests
 * (AcceptEnv). Values are single-quoted, so any byte string arrives intact.
 */
#include "ssh/host.h"

#include <string.h>

int command_build(struct buf *out, const char *command, char *const *env,
		  size_t nenv)
{
	for (size_t i = 0; i < nenv; i++) {
		const char *eq = strchr(env[i], '=');

		if (!eq || !env_name_valid(env[i], (size_t)(eq - env[i])))
			return SSH_EINVAL;
		if (buf_appends(out, "export ") ||
		    buf_append(out, env[i], (size_t)(eq - env[i]) + 1) ||
		    shq_append(out, eq + 1) || buf_appends(out, "; "))
			return SSH_ENOMEM;
	}
	return buf_appends(out, command) ? SSH_ENOMEM : 0;
}
