/*
 * supervise_table.h (private to supervisor/): the supervisor's phases, the
 * events it reacts to, and a read-only view of the phase x event table
 * the loop dispatches on (supervise_table.c), so a test can walk every
 * cell.
 */
#ifndef SLICECTL_SUPERVISOR_SUPERVISE_TABLE_H
#define SLICECTL_SUPERVISOR_SUPERVISE_TABLE_H

enum sup_phase {
	P_JOIN,      /* waiting for control.json */
	P_RESTORE,   /* restoring the generation's step */
	P_PREFLIGHT, /* job.json's preflight runs, before the trainer */
	P_RUN,       /* the trainer runs */
	P_STOP,      /* stopping the trainer for a new generation or the end */
	P_WAIT_GEN,  /* the trainer failed; waiting for the next generation */
	P_FINISHED,  /* the trainer exited 0; waiting for the others */
	P_EMERGENCY, /* a notice or a deadline: final step, upload */
	P_WAITING,   /* a flex-start run ended: waiting for capacity */
	P_END,
	P_COUNT,
};

/* In the order one pass of the loop looks at them: a pass stops at the
 * first event that moves the machine to another phase, and the next pass
 * follows at once. Most are conditions looked at on every pass, so that
 * one seen while its phase ignored it is acted on in the next phase. */
enum sup_event {
	EV_NOTICE,         /* SIGTERM or a metadata notice */
	EV_RESTORED,       /* the syncer's restore finished */
	EV_WRITTEN,        /* its bump or state change of control.json did */
	EV_CHECKED,        /* it checked whether the run is done */
	EV_DELETED,        /* it deleted the queued resource (or failed to) */
	EV_CONTROL,        /* control.json has been read */
	EV_RUN_ENDED,      /* control.json: the run is no longer running */
	EV_NEW_GENERATION, /* control.json: a newer generation runs */
	EV_RETRY,          /* the time to ask the syncer again came */
	EV_DEADLINE,       /* control.json's deadline is within its lead */
	EV_LOOK,           /* progress looked at: steps, output, commits */
	EV_EXITED,         /* the trainer exited */
	EV_HANG,           /* the trainer showed no progress for too long */
	EV_GRACE,          /* the trainer's grace period ran out */
	EV_COUNT,
};

enum sup_cell {
	SUP_CELL_UNSET,      /* a hole in the table: the test fails on it */
	SUP_CELL_IMPOSSIBLE, /* cannot be raised in the phase (logged) */
	SUP_CELL_IGNORED,    /* raised, nothing to do in the phase */
	SUP_CELL_DEFERRED,   /* left for the next phase (a syncer result) */
	SUP_CELL_ACTION,
};

#define SUP_PHASE_BIT(p) (1u << (p))

extern const char *const sup_phase_names[P_COUNT];
extern const char *const sup_event_names[EV_COUNT];

/* The transitions the machine may make, as a mask of SUP_PHASE_BITs per
 * phase; staying is always allowed. Every action's cell names the phases
 * it may leave the machine in, and the loop checks it does. */
extern const unsigned sup_allowed[P_COUNT];

struct sup_cell_view {
	enum sup_cell kind;
	const char *action; /* its function's name; NULL but for actions */
	unsigned next;      /* SUP_PHASE_BITs it may end in */
};

/* For tests: cell (p, ev) of the table. */
void sup_table_view(enum sup_phase p, enum sup_event ev,
		    struct sup_cell_view *out);

#endif
