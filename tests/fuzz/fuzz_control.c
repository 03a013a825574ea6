/*
 * fuzz_control.c: control.json as slicectl and the supervisors read it
 * (control_load, run/control.c), from a file:// store whose
 * control.json is the input. What loads is a state the run can be in.
 */
#include "fuzz.h"

#include "cloud/cloud.h"
#include "run/run.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const states[] = { "running", "stopping", "done",
					      "failed" };
	struct store *s = fuzz_store("run");
	struct control c;
	struct err e;
	bool known = false;

	fuzz_write("run/" RUN_CONTROL, data, size);
	if (control_load(s, &c, &e)) {
		FUZZ_ASSERT(e.msg[0]);
		return 0;
	}
	for (size_t i = 0; i < sizeof(states) / sizeof(*states); i++)
		known |= !strcmp(c.state, states[i]);
	FUZZ_ASSERT(known);
	FUZZ_ASSERT(c.generation >= 1);
	FUZZ_ASSERT(c.restore_step >= -1);
	FUZZ_ASSERT(memchr(c.reason, '\0', sizeof(c.reason)));
	FUZZ_ASSERT(memchr(c.updated_by, '\0', sizeof(c.updated_by)));
	FUZZ_ASSERT(memchr(c.time, '\0', sizeof(c.time)));
	return 0;
}
