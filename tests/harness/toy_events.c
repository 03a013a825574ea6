/* tests/harness/toy_events.c: see harness.h (a file of its own so that
 * only the tests that read the toy trainer's events link Jansson). */
#include "tests/harness/harness.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

unsigned toy_events(const char *path, int process, long long generation,
		    const char *what, long long *last_step)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	unsigned n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		json_t *j = json_loads(line, 0, NULL);
		const char *ev;

		if (!j)
			continue;
		ev = json_string_value(json_object_get(j, "event"));
		if ((process < 0 ||
		     json_integer_value(json_object_get(j, "process")) ==
			     process) &&
		    (generation < 0 ||
		     json_integer_value(json_object_get(j, "generation")) ==
			     generation) &&
		    ev && !strcmp(ev, what)) {
			n++;
			if (last_step)
				*last_step = json_integer_value(
					json_object_get(j, "step"));
		}
		json_decref(j);
	}
	fclose(f);
	return n;
}
