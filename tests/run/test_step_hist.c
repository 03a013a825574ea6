/*
 * The step-time summary of worker 0's progress events (run/run.h): what
 * the supervisor's clock counts, the text within an event's details,
 * and summaries a reader must refuse.
 */
#include "run/run.h"

#include <criterion/criterion.h>
#include <string.h>

Test(step_hist, clock_skips_the_first_step_and_shares_unseen_ones)
{
	struct step_clock c = { 0 };

	step_clock_start(&c);
	step_clock_saw(&c, 101, 5000000); /* start-up, not a step time */
	step_clock_saw(&c, 102, 5100000);
	step_clock_saw(&c, 105, 5400000); /* three went by: 100 ms each */
	step_clock_saw(&c, 105, 9000000); /* the same step again: nothing */
	cr_assert_eq(c.h.n, 4);
	cr_assert_float_eq(c.h.sum_ms, 400, 1e-9);
	step_clock_start(&c);          /* a new trainer */
	step_clock_saw(&c, 100, 20000000);
	cr_assert_eq(c.h.n, 4);
}

Test(step_hist, text_fits_and_reads_back)
{
	struct step_hist h = { 0 }, back = { 0 };
	char text[256];
	struct err e;

	for (int i = 0; i < 1000; i++)
		step_hist_add(&h, 20 + (i % 7) * 0.3, 1);
	step_hist_add(&h, 900, 2); /* checkpoint stalls */
	cr_assert_eq(step_hist_format(&h, text, sizeof(text)), 0);
	cr_assert_lt(strlen(text), sizeof(text));
	cr_assert_eq(step_hist_parse(text, &back, &e), 0, "%s", e.msg);
	cr_assert_eq(back.n, h.n);
	cr_assert_float_eq(back.sum_ms, h.sum_ms, 1e-3);
}

Test(step_hist, wide_spreads_coarsen_to_fit)
{
	struct step_hist h = { 0 }, back = { 0 };
	char text[256];
	struct err e;

	for (int i = 0; i < 600; i++)
		step_hist_add(&h, 1 + i * 17.0, 1 + (unsigned)i % 5);
	cr_assert_eq(step_hist_format(&h, text, sizeof(text)), 0);
	cr_assert_eq(step_hist_parse(text, &back, &e), 0, "%s", e.msg);
	cr_assert_eq(back.n, h.n);
	cr_assert_neq(strstr(text, "\"w\":1,"), text, "%s", text);
}

Test(step_hist, malformed_summaries_are_refused)
{
	static const char *const bad[] = {
		"", "not json", "{}", "{\"n\":2,\"sum_us\":5,\"b\":3,\"w\":1}",
		"{\"n\":2,\"sum_us\":5,\"b\":3,\"w\":1,\"h\":[1]}",
		"{\"n\":1,\"sum_us\":5,\"b\":3,\"w\":3,\"h\":[1]}",
		"{\"n\":1,\"sum_us\":-5,\"b\":3,\"w\":1,\"h\":[1]}",
		"{\"n\":1,\"sum_us\":5,\"b\":-3,\"w\":1,\"h\":[1]}",
		"{\"n\":1,\"sum_us\":5,\"b\":1023,\"w\":1,\"h\":[0,0,1]}",
		"{\"n\":1,\"sum_us\":5,\"b\":3,\"w\":1,\"h\":[\"1\"]}",
		"{\"n\":0,\"sum_us\":5,\"b\":3,\"w\":1,\"h\":[1,-1]}",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		struct step_hist h = { 0 };
		struct err e;

		cr_assert_eq(step_hist_parse(bad[i], &h, &e), COMMON_EINVAL,
			     "%s", bad[i]);
		cr_assert_eq(h.n, 0, "%s", bad[i]);
		cr_assert_gt(strlen(e.msg), 0);
	}
}
