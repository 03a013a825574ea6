/*
 * tests/supervisor/test_supervise_table.c: the supervisor's phase x event
 * table (supervise_table.h), walked cell by cell: every cell is an action,
 * ignored, deferred or impossible, never a hole; every action's next
 * phases are transitions the machine may make; every transition it may
 * make is some action's; and the names match the enums.
 */
#include "supervisor/supervise_table.h"

#include <criterion/criterion.h>
#include <string.h>

Test(table, every_phase_and_event_has_a_name)
{
	for (int p = 0; p < P_COUNT; p++)
		cr_assert(sup_phase_names[p] && *sup_phase_names[p],
			  "phase %d has no name", p);
	for (int ev = 0; ev < EV_COUNT; ev++)
		cr_assert(sup_event_names[ev] && *sup_event_names[ev],
			  "event %d has no name", ev);
	for (int a = 0; a < P_COUNT; a++)
		for (int b = a + 1; b < P_COUNT; b++)
			cr_assert_str_neq(sup_phase_names[a],
					  sup_phase_names[b]);
	for (int a = 0; a < EV_COUNT; a++)
		for (int b = a + 1; b < EV_COUNT; b++)
			cr_assert_str_neq(sup_event_names[a],
					  sup_event_names[b]);
}

Test(table, every_cell_is_decided)
{
	for (int p = 0; p < P_COUNT; p++)
		for (int ev = 0; ev < EV_COUNT; ev++) {
			struct sup_cell_view v;

			sup_table_view(p, ev, &v);
			cr_assert_neq(v.kind, SUP_CELL_UNSET,
				      "%s in phase %s: no cell",
				      sup_event_names[ev], sup_phase_names[p]);
			cr_assert_eq(v.kind == SUP_CELL_ACTION,
				     v.action != NULL,
				     "%s in phase %s: an action needs a "
				     "function, nothing else has one",
				     sup_event_names[ev], sup_phase_names[p]);
			if (v.kind != SUP_CELL_ACTION)
				cr_assert_eq(v.next, 0);
		}
}

/* Every action may end in its own phase (nothing happened) or in one
 * the diagram allows from there; END is the last. */
Test(table, actions_lead_only_where_the_machine_may_go)
{
	for (int p = 0; p < P_COUNT; p++)
		for (int ev = 0; ev < EV_COUNT; ev++) {
			struct sup_cell_view v;
			unsigned stray;

			sup_table_view(p, ev, &v);
			if (v.kind != SUP_CELL_ACTION)
				continue;
			cr_assert(v.next & SUP_PHASE_BIT(p));
			stray = v.next & ~(sup_allowed[p] | SUP_PHASE_BIT(p));
			for (int q = 0; q < P_COUNT; q++)
				cr_assert(!(stray & SUP_PHASE_BIT(q)),
					  "%s in phase %s: %s may lead to %s",
					  sup_event_names[ev],
					  sup_phase_names[p], v.action,
					  sup_phase_names[q]);
		}
	cr_assert_eq(sup_allowed[P_END], 0);
	for (int ev = 0; ev < EV_COUNT; ev++) {
		struct sup_cell_view v;

		sup_table_view(P_END, ev, &v);
		cr_assert_eq(v.kind, SUP_CELL_IMPOSSIBLE,
			     "%s after the end", sup_event_names[ev]);
	}
}

/* The diagram says nothing the table does not do. */
Test(table, every_allowed_transition_is_some_actions)
{
	for (int p = 0; p < P_COUNT; p++)
		for (int q = 0; q < P_COUNT; q++) {
			bool found = false;

			if (!(sup_allowed[p] & SUP_PHASE_BIT(q)))
				continue;
			for (int ev = 0; ev < EV_COUNT && !found; ev++) {
				struct sup_cell_view v;

				sup_table_view(p, ev, &v);
				found = v.kind == SUP_CELL_ACTION &&
					(v.next & SUP_PHASE_BIT(q));
			}
			cr_assert(found, "%s -> %s: no action leads there",
				  sup_phase_names[p], sup_phase_names[q]);
		}
}

/* Every phase but the end can be left; every phase is reached. */
Test(table, no_phase_is_a_trap_or_unreachable)
{
	unsigned reached = SUP_PHASE_BIT(P_JOIN);

	for (int p = 0; p < P_COUNT; p++) {
		cr_assert(p == P_END || sup_allowed[p] & ~SUP_PHASE_BIT(p),
			  "%s cannot be left", sup_phase_names[p]);
		reached |= sup_allowed[p];
	}
	for (int p = 0; p < P_COUNT; p++)
		cr_assert(reached & SUP_PHASE_BIT(p), "%s is never reached",
			  sup_phase_names[p]);
}

/* A notice always counts: every phase with a trainer reaches the
 * emergency, every phase ends on it, except the emergency itself, which
 * is already what a notice asks for. */
Test(table, a_notice_ends_every_phase)
{
	for (int p = 0; p < P_END; p++) {
		struct sup_cell_view v;

		sup_table_view(p, EV_NOTICE, &v);
		if (p == P_EMERGENCY) {
			cr_assert_eq(v.kind, SUP_CELL_IGNORED);
			continue;
		}
		cr_assert_eq(v.kind, SUP_CELL_ACTION, "%s",
			     sup_phase_names[p]);
		cr_assert(v.next & SUP_PHASE_BIT(P_END), "%s",
			  sup_phase_names[p]);
	}
}
