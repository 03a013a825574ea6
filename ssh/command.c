/*
 * command.c: what each host's sshd is asked to run.
 *
 * Per-host environment travels inside the command, as exports in front of
 * it, because sshd refuses most "env" requests (AcceptEnv). Values are
 * single-quoted, so any byte string arrives intact.
 *
 * A command without input is also wrapped so that it can be ended from
 * here: sshd without a pty does not end a command when its channel closes,
 * and libssh2 1.10 cannot send RFC 4254's "signal" request. The wrapper
 * runs the command in the background, with its stdin on /dev/null, and a
 * watcher reads signal names from the channel's stdin and sends them to
 * the whole process group sshd made for the session. If the channel goes
 * away while the command still runs, the watcher ends it too. The exit
 * status, or the signal the command died of, is passed on as it was.
 */
#include "ssh/host.h"

#include <string.h>

static const char wrapper_head[] =
	"exec 3<&0\n"
	"(";
static const char wrapper_tail[] =
	"\n) </dev/null &\n"
	"c=$!\n"
	"(trap '' TERM INT HUP\n"
	" while IFS= read -r s; do kill -s \"$s\" 0; done\n"
	" if kill -0 \"$c\" 2>/dev/null; then kill -s TERM 0; fi\n"
	") <&3 >/dev/null 2>&1 &\n"
	"w=$!\n"
	"exec 3<&-\n"
	"wait \"$c\"; s=$?\n"
	"kill -s KILL \"$w\" 2>/dev/null\n"
	"if [ \"$s\" -gt 128 ] && [ \"$s\" -lt 160 ]; then "
	"kill -s \"$(kill -l \"$s\")\" $$; fi\n"
	"exit \"$s\"\n";

static int exports(struct buf *out, char *const *env, size_t nenv)
{
	for (size_t i = 0; i < nenv; i++) {
		const char *eq = strchr(env[i], '=');

		if (!eq || !env_name_valid(env[i], (size_t)(eq - env[i])))
			return SSH_EINVAL;
		if (buf_appends(out, "export ") ||
		    buf_append(out, env[i], (size_t)(eq - env[i]) + 1) ||
		    shq_append(out, eq + 1) || buf_appends(out, "\n"))
			return SSH_ENOMEM;
	}
	return 0;
}

int command_build(struct buf *out, const char *command, char *const *env,
		  size_t nenv, bool endable)
{
	struct buf script;
	int rc;

	if (!endable) {
		rc = exports(out, env, nenv);
		return rc ? rc : buf_appends(out, command) ? SSH_ENOMEM : 0;
	}
	/* The login shell may not be a POSIX shell; the wrapper needs one. */
	buf_init(&script);
	rc = exports(&script, env, nenv);
	if (!rc && (buf_appends(&script, wrapper_head) ||
		    buf_appends(&script, command) ||
		    buf_appends(&script, wrapper_tail) ||
		    buf_appends(out, "exec sh -c ") || shq_append(out, script.data)))
		rc = SSH_ENOMEM;
	buf_release(&script);
	return rc;
}
