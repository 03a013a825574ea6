/* local_summary.c: see local_summary.h. */
#include "tests/launcher/target/local/local_summary.h"

#include <stdio.h>
#include <stdlib.h>
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

char *local_story(const char *out)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return strdup("(out of memory)");
	for (const char *line = out; line && *line;) {
		const char *nl = strchr(line, '\n');
		size_t n = nl ? (size_t)(nl - line) : strlen(line);
		json_t *j = json_loadb(line, n, 0, NULL);
		const char *type = json_string_value(json_object_get(j,
								     "type"));
		const char *msg = json_string_value(json_object_get(j,
								    "message"));

		if (type && !strcmp(type, "summary")) {
			char *c = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);

			fprintf(f, "summary: %s\n", c ? c : "?");
			free(c);
		} else if (msg) {
			fprintf(f, "%6.1f s  %s\n",
				json_number_value(json_object_get(j,
								  "elapsed_s")),
				msg);
		} else {
			fprintf(f, "%.*s\n", (int)n, line);
		}
		json_decref(j);
		line = nl ? nl + 1 : NULL;
	}
	fclose(f);
	return text;
}
