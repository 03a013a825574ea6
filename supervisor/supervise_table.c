/*
 * supervise_table.c: the names of the supervisor's phases and events, and
 * the transitions between phases it may make (supervise_table.h). The
 * table itself, whose cells are supervise.c's actions, is in supervise.c.
 */
#include "supervisor/supervise_table.h"

#define B(p) SUP_PHASE_BIT(p)

const char *const sup_phase_names[P_COUNT] = {
	[P_JOIN] = "join", [P_RESTORE] = "restore", [P_RUN] = "run",
	[P_STOP] = "stop", [P_WAIT_GEN] = "wait-generation",
	[P_FINISHED] = "finished", [P_EMERGENCY] = "emergency",
	[P_WAITING] = "wait-capacity", [P_END] = "end",
};

const char *const sup_event_names[EV_COUNT] = {
	[EV_NOTICE] = "notice", [EV_RESTORED] = "restored",
	[EV_WRITTEN] = "control-written", [EV_CHECKED] = "done-checked",
	[EV_DELETED] = "queued-resource-deleted", [EV_CONTROL] = "control",
	[EV_RUN_ENDED] = "run-ended", [EV_NEW_GENERATION] = "new-generation",
	[EV_RETRY] = "retry", [EV_DEADLINE] = "deadline", [EV_LOOK] = "look",
	[EV_EXITED] = "trainer-exited", [EV_HANG] = "hang",
	[EV_GRACE] = "grace-over",
};

/* RESTORE may enter itself again: a newer generation came while it
 * restored. A trainer is alive only in RUN, STOP and EMERGENCY, so only
 * they (RUN through a deadline, STOP through a notice) reach EMERGENCY. */
const unsigned sup_allowed[P_COUNT] = {
	[P_JOIN] = B(P_RESTORE) | B(P_WAIT_GEN) | B(P_END),
	[P_RESTORE] = B(P_RESTORE) | B(P_RUN) | B(P_WAIT_GEN) | B(P_WAITING) |
		      B(P_END),
	[P_RUN] = B(P_STOP) | B(P_RESTORE) | B(P_EMERGENCY) | B(P_FINISHED) |
		  B(P_WAIT_GEN) | B(P_END),
	[P_STOP] = B(P_RESTORE) | B(P_EMERGENCY) | B(P_END),
	[P_WAIT_GEN] = B(P_RESTORE) | B(P_END),
	[P_FINISHED] = B(P_RESTORE) | B(P_END),
	[P_EMERGENCY] = B(P_WAIT_GEN) | B(P_WAITING) | B(P_END),
	[P_WAITING] = B(P_RESTORE) | B(P_END),
	[P_END] = 0,
};
