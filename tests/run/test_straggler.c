/*
 * Stragglers (run/run.h): a worker's recent step-time figure (the median
 * of its last window of steps) and the rule that flags it against its
 * peers' median + 3 x MAD, sustained; its near misses and the
 * degenerate cases (peers in lockstep, too few workers, too few steps).
 */
#include "run/run.h"

#include <criterion/criterion.h>
#include <string.h>

static struct step_figure fig(double median_ms, unsigned n, double span_s)
{
	return (struct step_figure){ median_ms, n, span_s };
}

Test(step_recent, median_of_the_window_and_at_least_the_newest_few)
{
	struct step_recent r = { 0 };
	struct step_figure f;

	/* 20 steps of 100 ms ending at 1 s .. 2.9 s, one slow checkpoint
	 * step among them: the median does not move. */
	for (int i = 0; i < 20; i++)
		step_recent_add(&r, i == 10 ? 700 : 100, 1,
				1000 + 100 * (uint64_t)i);
	step_recent_figure(&r, 3000, &f);
	cr_assert_eq(f.n, 20);
	cr_assert_float_eq(f.median_ms, 100, 1e-6);
	/* From the first step's start (0.9 s; the slow one's, 1.3 s, is
	 * later) to now. */
	cr_assert_float_eq(f.span_s, 2.1, 1e-6);
	/* A minute later, only the newest STEP_RECENT_MIN remain. */
	step_recent_figure(&r, 63000, &f);
	cr_assert_eq(f.n, STEP_RECENT_MIN);
	cr_assert_float_eq(f.median_ms, 100, 1e-6);
	/* Steps that went by unseen count each; the ring keeps its
	 * newest STEP_RECENT_MAX. */
	step_recent_add(&r, 40, 1000, 64000);
	step_recent_figure(&r, 64000, &f);
	cr_assert_eq(f.n, STEP_RECENT_MAX);
	cr_assert_float_eq(f.median_ms, 40, 1e-6);
}

Test(step_recent, empty_has_no_figure)
{
	struct step_recent r = { 0 };
	struct step_figure f;

	step_recent_figure(&r, 1000, &f);
	cr_assert_eq(f.n, 0);
}

static void judge(const struct step_figure *f, size_t n,
		  struct straggler_verdict *v)
{
	straggler_judge(f, n, v);
}

Test(straggler, flags_the_slow_one_only)
{
	struct step_figure f[4] = { fig(100, 20, 12), fig(104, 20, 12),
				    fig(98, 20, 12), fig(400, 20, 12) };
	struct straggler_verdict v[4];

	judge(f, 4, v);
	for (int i = 0; i < 3; i++) {
		cr_assert(v[i].judged);
		cr_assert_not(v[i].flagged, "worker %d: %s", i, v[i].reason);
	}
	cr_assert(v[3].flagged);
	cr_assert_float_eq(v[3].peers_median_ms, 100, 1e-9);
	cr_assert(strstr(v[3].reason, "median step 400.0 ms over its last 20 "
				      "steps (12.0 s) > peers' median 100.0 ms"),
		  "%s", v[3].reason);
}

Test(straggler, near_misses_are_not_flagged)
{
	/* Peers 100, 110, 90: median 100, MAD 10, threshold 130. */
	struct step_figure f[4] = { fig(100, 20, 12), fig(110, 20, 12),
				    fig(90, 20, 12), fig(130, 20, 12) };
	struct straggler_verdict v[4];

	judge(f, 4, v);
	cr_assert_float_eq(v[3].threshold_ms, 130, 1e-9);
	cr_assert_not(v[3].flagged, "at the threshold: %s", v[3].reason);
	f[3].median_ms = 130.5;
	judge(f, 4, v);
	cr_assert(v[3].flagged, "just above");
	/* Slow, but not for long enough: said, not flagged. */
	f[3] = fig(400, 20, 9.5);
	judge(f, 4, v);
	cr_assert_not(v[3].flagged);
	cr_assert(strstr(v[3].reason, "not yet sustained"), "%s",
		  v[3].reason);
	/* ...unless the ring is full of fast steps. */
	f[3] = fig(400, STEP_RECENT_MAX, 2);
	judge(f, 4, v);
	cr_assert(v[3].flagged);
	/* Too few steps: not judged at all, nor a peer. */
	f[3] = fig(400, STEP_RECENT_MIN - 1, 60);
	judge(f, 4, v);
	cr_assert_not(v[3].judged);
	cr_assert_not(v[3].flagged);
	cr_assert_eq(v[3].reason[0], '\0');
	cr_assert(v[0].judged, "three peers are enough");
}

Test(straggler, peers_in_lockstep_have_a_floor_under_their_mad)
{
	/* MAD 0: the floor is 5% of 100 ms, the threshold 115 ms. */
	struct step_figure f[4] = { fig(100, 20, 12), fig(100, 20, 12),
				    fig(100, 20, 12), fig(114, 20, 12) };
	struct straggler_verdict v[4];

	judge(f, 4, v);
	cr_assert_float_eq(v[3].threshold_ms, 115, 1e-9);
	cr_assert_not(v[3].flagged);
	f[3].median_ms = 116;
	judge(f, 4, v);
	cr_assert(v[3].flagged);
	/* Sub-millisecond steps: at least 1 ms of MAD. */
	for (int i = 0; i < 4; i++)
		f[i] = fig(0.2, 20, 12);
	f[3].median_ms = 3.1;
	judge(f, 4, v);
	cr_assert_float_eq(v[3].threshold_ms, 3.2, 1e-9);
	cr_assert_not(v[3].flagged);
	for (int i = 0; i < 3; i++)
		cr_assert_not(v[i].flagged);
}

Test(straggler, fewer_than_three_workers_judge_nobody)
{
	struct step_figure f[3] = { fig(100, 20, 12), fig(900, 20, 12),
				    fig(0, 0, 0) };
	struct straggler_verdict v[3];

	judge(f, 3, v);
	for (int i = 0; i < 3; i++) {
		cr_assert_not(v[i].flagged);
		cr_assert_not(v[i].judged);
	}
	cr_assert(strstr(v[1].reason, "fewer than 3 workers"), "%s",
		  v[1].reason);
	judge(f, 0, v);
	judge(f, 1, v);
	cr_assert_not(v[0].flagged);
}

Test(straggler, bad_figures_never_count)
{
	struct step_figure f[4] = { fig(100, 20, 12), fig(100, 20, 12),
				    fig(100, 20, 12), fig(-5, 20, 12) };
	struct straggler_verdict v[4];

	judge(f, 4, v);
	cr_assert_not(v[3].judged);
	f[3].median_ms = 1.0 / 0.0;
	judge(f, 4, v);
	cr_assert_not(v[3].judged);
	cr_assert_not(v[3].flagged);
}
