/*
 * tests/kube/test_watch.c: list then watch; a stream cut in the middle is
 * resumed from the last resourceVersion seen (bookmarks included), a 410
 * (as an ERROR event or as the answer) lists again, the callback's stop
 * and the time limit end it.
 */
#include "tests/kube/stub.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define PODS "/api/v1/namespaces/d/pods"

static struct kstub stub;

static void setup(void)
{
	memset(&stub, 0, sizeof(stub));
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "5", 1);
}

static void teardown(void)
{
	kstub_stop(&stub);
}

TestSuite(watch, .init = setup, .fini = teardown, .timeout = 60);

struct seen {
	struct buf log;  /* "TYPE name;" per event */
	const char *stop_on; /* a type that ends the watch with 7 */
};

static int on_event(void *ud, const char *type, json_t *obj)
{
	struct seen *s = ud;
	const char *name = json_string_value(json_object_get(
		json_object_get(obj, "metadata"), "name"));

	buf_appendf(&s->log, "%s %s;", type, name ? name : "?");
	return s->stop_on && strcmp(type, s->stop_on) == 0 ? 7 : 0;
}

#define POD(name, rv) "{\"metadata\": {\"name\": \"" name "\", " \
	"\"resourceVersion\": \"" rv "\"}}"
#define LIST(rv, items) "{\"path\": \"" PODS "?labelSelector\", \"body\": " \
	"{\"kind\": \"PodList\", \"metadata\": {\"resourceVersion\": \"" rv \
	"\"}, \"items\": [" items "]}}"
#define EV(type, obj) "{\"type\": \"" type "\", \"object\": " obj "}"
#define WATCH(extra, events) "{\"path\": \"" PODS "?watch=1\", " extra \
	"\"events\": [" events "]}"

static const char *path_of(json_t *all, size_t i)
{
	const char *p = json_string_value(json_object_get(
		json_array_get(all, i), "path"));

	cr_assert(p, "no request %zu", i);
	return p;
}

Test(watch, resumes_and_relists)
{
	struct kube_client *k = kstub_client(&stub, "["
		LIST("10", POD("a", "5") "," POD("b", "6")) ","
		WATCH("\"end\": \"cut\", ",
		      EV("MODIFIED", POD("a", "11")) ","
		      EV("BOOKMARK", "{\"metadata\": {\"resourceVersion\": "
			 "\"12\"}}")) ","
		WATCH("", EV("ADDED", POD("c", "13")) ","
		      EV("ERROR", "{\"kind\": \"Status\", \"code\": 410, "
			 "\"reason\": \"Expired\", \"message\": \"too old "
			 "resource version: 12 (40)\"}")) ","
		LIST("20", POD("a", "19")) ","
		WATCH("", EV("DELETED", POD("a", "21")) ","
		      EV("ADDED", POD("never", "22")))
		"]");
	struct seen s = { .stop_on = "DELETED" };
	struct err e;
	json_t *all;

	buf_init(&s.log);
	err_init(&e);
	cr_assert_eq(kube_watch(k, PODS, "app=x", 20000, on_event, &s, &e), 7,
		     "%s", e.msg);
	cr_assert_str_eq(s.log.data, "ADDED a;ADDED b;MODIFIED a;ADDED c;"
			 "ADDED a;DELETED a;");
	all = kstub_requests(&stub);
	cr_assert_eq(json_array_size(all), 5);
	cr_assert_str_eq(path_of(all, 0), PODS "?labelSelector=app%3Dx");
	cr_assert_eq(strncmp(path_of(all, 1), PODS "?watch=1&allowWatchBookmarks"
			     "=true&resourceVersion=10&timeoutSeconds=1",
			     strlen(PODS) + 69), 0, "%s", path_of(all, 1));
	cr_assert(strstr(path_of(all, 1), "&labelSelector=app%3Dx"));
	cr_assert(strstr(path_of(all, 2), "&resourceVersion=12&"), "%s",
		  path_of(all, 2));
	cr_assert_str_eq(path_of(all, 3), PODS "?labelSelector=app%3Dx");
	cr_assert(strstr(path_of(all, 4), "&resourceVersion=20&"), "%s",
		  path_of(all, 4));
	json_decref(all);
	buf_release(&s.log);
	kube_client_free(k);
}

Test(watch, gone_answer_relists_and_error_events_end)
{
	struct kube_client *k = kstub_client(&stub, "["
		LIST("1", "") ","
		"{\"path\": \"" PODS "?watch=1\", \"status\": 410, \"body\": "
		"{\"kind\": \"Status\", \"code\": 410}},"
		LIST("2", POD("x", "2")) ","
		WATCH("", EV("ERROR", "{\"kind\": \"Status\", \"code\": 500, "
			     "\"message\": \"etcd is sad\"}"))
		"]");
	struct seen s = { 0 };
	struct err e;

	buf_init(&s.log);
	err_init(&e);
	cr_assert_eq(kube_watch(k, PODS, "app=x", 20000, on_event, &s, &e),
		     KUBE_EHTTP);
	cr_assert(strstr(e.msg, "the watch ended with an error (500): etcd "
			 "is sad"), "%s", e.msg);
	cr_assert_str_eq(s.log.data, "ADDED x;");
	buf_release(&s.log);
	kube_client_free(k);
}

Test(watch, time_limit_ends_it)
{
	struct kube_client *k = kstub_client(&stub, "["
		LIST("1", POD("x", "1")) ","
		WATCH("\"repeat\": true, \"event_delay_ms\": 300, ",
		      EV("BOOKMARK", "{\"metadata\": {\"resourceVersion\": "
			 "\"2\"}}"))
		"]");
	struct seen s = { 0 };
	struct err e;
	uint64_t t0 = mono_ms(), ms;

	buf_init(&s.log);
	err_init(&e);
	cr_assert_eq(kube_watch(k, PODS, "app=x", 1000, on_event, &s, &e), 0,
		     "%s", e.msg);
	ms = mono_ms() - t0;
	cr_assert(ms >= 1000 && ms < 5000, "took %llu ms",
		  (unsigned long long)ms);
	cr_assert_str_eq(s.log.data, "ADDED x;");
	buf_release(&s.log);
	kube_client_free(k);
}
