/*
 * slicectl goodput end to end against a history built in a file://
 * bucket (run_state.c): the text and the JSON, --window, the exit
 * statuses, and the same headline on top of status and report.
 */
#include "tests/launcher/run_state.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(goodput_cmd, .init = up, .fini = down, .timeout = 120);

/* One worker: created 100 s ago, booted 90 s ago, started 88 s ago, 0.1 s
 * steps from 80 s ago to 20 s ago (600 of them), done 10 s ago. */
static void put_history(void)
{
	char t[6][40];
	const long at[6] = { 100, 90, 88, 50, 20, 10 };

	for (int i = 0; i < 6; i++)
		ago(t[i], sizeof(t[i]), at[i]);
	put_job(1, 1, 10, 100);
	put("events/000000-1790000000-slicectl.json",
	    "{\"writer\": \"slicectl\", \"events\": [{\"time\": \"%s\", "
	    "\"kind\": \"created\", \"generation\": 0, \"worker\": "
	    "\"slicectl\", \"cause\": \"slicectl job\", \"by\": \"slicectl\", "
	    "\"step\": null, \"details\": {}}]}", t[0]);
	put("events/000001-1790000001-slice-0-worker-0.json",
	    "{\"writer\": \"slice-0-worker-0\", \"events\": ["
	    "{\"time\": \"%s\", \"kind\": \"boot\", \"generation\": 0, "
	    "\"step\": null},"
	    "{\"time\": \"%s\", \"kind\": \"start\", \"generation\": 1, "
	    "\"step\": 0},"
	    "{\"time\": \"%s\", \"kind\": \"progress\", \"generation\": 1, "
	    "\"step\": 300, \"details\": {\"n\": 300, \"sum_us\": 30000000, "
	    "\"b\": 232, \"w\": 1, \"h\": [300]}},"
	    "{\"time\": \"%s\", \"kind\": \"progress\", \"generation\": 1, "
	    "\"step\": 600, \"details\": {\"n\": 300, \"sum_us\": 30000000, "
	    "\"b\": 232, \"w\": 1, \"h\": [300]}},"
	    "{\"time\": \"%s\", \"kind\": \"done\", \"generation\": 1, "
	    "\"step\": 600}]}", t[1], t[2], t[3], t[4], t[5]);
}

static double number(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	cr_assert(json_is_number(v), "no number %s", key);
	return json_number_value(v);
}

Test(goodput_cmd, text_and_json)
{
	struct run_result r;
	json_t *v, *b, *x;
	const char *k;
	double sum;

	put_history();
	cr_assert_eq(ops(&r, (const char *[]){ "goodput", "run-1", NULL }), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_assert_eq(strncmp(r.out, "goodput 66.", 11), 0, "%s", r.out);
	cr_assert(strstr(r.out, "waiting_for_capacity"), "%s", r.out);
	run_result_release(&r);
	cr_assert_eq(ops(&r, (const char *[]){ "goodput", "run-1", "--format",
					       "json", NULL }), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	v = parse(r.out);
	cr_assert_float_eq(number(v, "elapsed_s"), 90, 1e-9);
	cr_assert_float_eq(number(v, "ideal_step_s"), 0.1, 1e-9);
	cr_assert_float_eq(number(v, "productive_s"), 60, 1e-6);
	cr_assert_float_eq(number(v, "goodput"), 60.0 / 90, 1e-6);
	b = json_object_get(v, "badput");
	cr_assert_eq(json_object_size(b), 9);
	cr_assert_float_eq(number(b, "waiting_for_capacity"), 10, 1e-9);
	sum = number(v, "productive_s");
	json_object_foreach(b, k, x)
		sum += json_number_value(x);
	cr_assert_float_eq(sum, 90, 1e-6);
	cr_assert_eq(json_array_size(json_object_get(v, "failures")), 0);
	json_decref(v);
	run_result_release(&r);
	cr_assert_eq(ops(&r, (const char *[]){ "goodput", "run-1", "--window",
					       "30s", "--format", "json",
					       NULL }), 0);
	v = parse(r.out);
	cr_assert_float_eq(number(v, "elapsed_s"), 30, 1e-9);
	json_decref(v);
	run_result_release(&r);
}

Test(goodput_cmd, status_and_report_lead_with_it)
{
	char page[HARNESS_PATH + 32];
	struct run_result r;
	json_t *v;
	char *html;

	put_history();
	put_control(1, "done", "every worker finished", "slice-0-worker-0",
		    10);
	cr_assert_eq(ops(&r, (const char *[]){ "status", "run-1", NULL }), 0);
	cr_assert_eq(strncmp(r.out, "goodput 66.", 11), 0, "%s", r.out);
	run_result_release(&r);
	cr_assert_eq(ops(&r, (const char *[]){ "status", "run-1", "--format",
					       "json", NULL }), 0);
	v = parse(r.out);
	cr_assert_float_eq(number(json_object_get(v, "goodput"), "goodput"),
			   60.0 / 90, 1e-6);
	json_decref(v);
	run_result_release(&r);
	snprintf(page, sizeof(page), "%s/page.html", tmp);
	cr_assert_eq(ops(&r, (const char *[]){ "report", "run-1", "--output",
					       page, NULL }), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	html = read_file(page, NULL);
	cr_assert(html && strstr(html, "<p class=\"goodput\"><b>goodput 66."),
		  "%s", html ? html : "no page");
	free(html);
	run_result_release(&r);
}

Test(goodput_cmd, exit_statuses)
{
	struct run_result r;

	put_job(1, 1, 10, 100);
	/* No history yet: nothing to measure, said plainly. */
	cr_assert_eq(ops(&r, (const char *[]){ "goodput", "run-1", NULL }), 1);
	cr_assert(strstr(r.err, "nothing to measure"), "%s", r.err);
	run_result_release(&r);
	cr_assert_eq(ops(&r, (const char *[]){ "goodput", "nosuch", NULL }),
		     4, "%s", r.err);
	run_result_release(&r);
	cr_assert_eq(ops(&r, (const char *[]){ "goodput", "run-1", "--window",
					       "soon", NULL }), 2);
	cr_assert(strstr(r.err, "--window"), "%s", r.err);
	run_result_release(&r);
	/* A batch that is not one is skipped, not fatal. */
	put("events/000001-1790000001-x.json", "{\"writer\": 5}");
	put("events/000001-1790000002-y.json", "not json at all");
	cr_assert_eq(ops(&r, (const char *[]){ "goodput", "run-1", NULL }), 1,
		     "%s", r.err);
	run_result_release(&r);
}
