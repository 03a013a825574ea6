/* local_summary.c: see local_summary.h. */
#include "tests/launcher/target/local/local_summary.h"

#include <string.h>

json_t *local_summary(const char *out)
{
	for (const char *line = out; line && *line;) {
		const char *nl = strchr(line, '\n');
		json_t *j = json_loadb(line, nl ? (size_t)(nl - line)
						: strlen(line), 0, NULL);
		const char *type = json_string_value(json_object_get(j,
								     "type"));

		if (type && !strcmp(type, "summary"))
			return j;
		json_decref(j);
		line = nl ? nl + 1 : NULL;
	}
	return NULL;
}
