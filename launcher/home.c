/*
 * home.c: see launcher.h.
 */
#include "launcher/launcher.h"

#include <stdlib.h>

int slicectl_home_path(struct buf *b, const char *name, struct err *e)
{
	const char *home = getenv("SLICECTL_HOME");
	int rc;

	if (home && *home) {
		rc = buf_appendf(b, "%s/%s", home, name);
	} else {
		home = home_dir();
		if (!home)
			return err_set(e, COMMON_EUSAGE,
				       "cannot find your home directory: set "
				       "HOME or SLICECTL_HOME");
		rc = buf_appendf(b, "%s/.slicectl/%s", home, name);
	}
	return rc ? err_set(e, COMMON_ENOMEM, "out of memory") : 0;
}
