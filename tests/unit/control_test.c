/* SPDX-License-Identifier: Apache-2.0 */
/* The control endpoints (sandbox/control.c) driven through real HTTP/1.1
 * exchanges: /health, /envs, /metrics, and /init's parsing and effects. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/state.h"
#include "sandbox/control.h"

#include "httptest.h"

static char dir[64];

static void setup(void)
{
	/* No MMDS here: /init decides on the token alone. */
	control_not_fc = true;
	snprintf(dir, sizeof(dir), "/tmp/envd-control-test.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(control_ca_bundle, sizeof(control_ca_bundle), "%s/ca-bundle.crt", dir);
	snprintf(control_ca_dir, sizeof(control_ca_dir), "%s/ca", dir);
	FILE *f = fopen(control_ca_bundle, "w");
	cr_assert_not_null(f);
	fputs("SYSTEM CA\n", f);
	fclose(f);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(control, .init = setup, .fini = teardown);

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	static char buf[4096];
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

/* An RFC 3339 time `ago` seconds before now (never far enough to set the clock). */
static const char *rfc3339_ago(int ago, char *buf, size_t len)
{
	time_t t = time(NULL) - ago;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

static struct ht_resp init(const char *body)
{
	return ht_post(control_init, "/init", "application/json", body);
}

Test(control, health_is_204_and_not_cached)
{
	struct ht_resp r = ht_get(control_health, "/health");

	cr_assert_eq(r.status, 204);
	cr_assert_str_eq(ht_header(&r, "Cache-Control"), "no-store");
	cr_assert_eq(r.body_len, 0);
	ht_free(&r);
}

Test(control, envs_lists_the_store_as_json)
{
	const char *keys[] = { "A", "QUOTE" }, *vals[] = { "1", "say \"hi\"" };
	struct ht_resp r;
	json_t *o;

	envstore_replace_user(keys, vals, 2);
	envstore_set_internal("E2B_INTERNAL", "x");
	r = ht_get(control_envs, "/envs");
	cr_assert_eq(r.status, 200);
	cr_assert(strstr(ht_header(&r, "Content-Type"), "application/json"));
	cr_assert_str_eq(ht_header(&r, "Cache-Control"), "no-store");
	cr_assert_eq(r.body[r.body_len - 1], '\n');
	o = json_loads(r.body, 0, NULL);
	cr_assert(json_is_object(o), "%s", r.body);
	cr_assert_str_eq(json_string_value(json_object_get(o, "A")), "1");
	cr_assert_str_eq(json_string_value(json_object_get(o, "QUOTE")), "say \"hi\"");
	cr_assert_str_eq(json_string_value(json_object_get(o, "E2B_INTERNAL")), "x");
	cr_assert_eq(json_object_size(o), 3);
	json_decref(o);
	ht_free(&r);
}

Test(control, envs_of_an_empty_store_is_an_empty_object)
{
	struct ht_resp r = ht_get(control_envs, "/envs");

	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(r.body, "{}\n");
	ht_free(&r);
}

Test(control, metrics_has_the_reference_shape)
{
	static const char *const ints[] = { "ts", "cpu_count", "mem_total_mib", "mem_used_mib", "mem_total",
					     "mem_used", "mem_cache", "disk_used", "disk_total" };
	struct ht_resp r;
	json_t *o;

	control_metrics_init();
	r = ht_get(control_metrics, "/metrics");
	cr_assert_eq(r.status, 200);
	cr_assert_str_eq(ht_header(&r, "Cache-Control"), "no-store");
	o = json_loads(r.body, 0, NULL);
	cr_assert(json_is_object(o), "%s", r.body);
	cr_assert_eq(json_object_size(o), 10, "%s", r.body);
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		json_t *v = json_object_get(o, ints[i]);
		cr_assert(json_is_integer(v), "%s is not an integer: %s", ints[i], r.body);
		cr_assert_geq(json_integer_value(v), 0, "%s", ints[i]);
	}
	json_t *pct = json_object_get(o, "cpu_used_pct");
	cr_assert(json_is_number(pct), "%s", r.body);
	cr_assert(json_number_value(pct) >= 0 && json_number_value(pct) <= 100);
	cr_assert_gt(json_integer_value(json_object_get(o, "cpu_count")), 0);
	cr_assert_gt(json_integer_value(json_object_get(o, "mem_total")), 0);
	cr_assert_leq(json_integer_value(json_object_get(o, "mem_used")),
		      json_integer_value(json_object_get(o, "mem_total")));
	cr_assert_leq(json_integer_value(json_object_get(o, "disk_used")),
		      json_integer_value(json_object_get(o, "disk_total")));
	cr_assert_eq(json_integer_value(json_object_get(o, "mem_total_mib")),
		     json_integer_value(json_object_get(o, "mem_total")) / 1024 / 1024);
	time_t now = time(NULL);
	cr_assert_leq(json_integer_value(json_object_get(o, "ts")), now);
	cr_assert_geq(json_integer_value(json_object_get(o, "ts")), now - 600);
	json_decref(o);
	ht_free(&r);
}

Test(control, init_rejects_malformed_bodies_with_400)
{
	static const char *const bad[] = {
		"{",                                         /* not JSON */
		"[1]",                                       /* not an object */
		"{\"accessToken\":\"\"}",                    /* an empty token */
		"{\"accessToken\":5}",                       /* not a string */
		"{\"accessToken\":\"a\\u0062\"}",            /* an escape in the token */
		"{\"envVars\":{\"A\":1}}",                   /* a value not a string */
		"{\"envVars\":[\"A\"]}",                     /* not an object */
		"{\"timestamp\":\"yesterday\"}",             /* not RFC 3339 */
		"{\"defaultUser\":7}",                       /* not a string */
		"{\"volumeMounts\":{}}",                     /* not an array */
		"{\"volumeMounts\":[{\"path\":1}]}",         /* a path not a string */
		"{\"a\":1,\"a\":2}",                         /* a duplicate key */
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ht_resp r = init(bad[i]);
		cr_assert_eq(r.status, 400, "%s answered %d", bad[i], r.status);
		cr_assert_str_eq(ht_header(&r, "X-Envd-Version"), ENVD_VERSION);
		ht_free(&r);
	}
	cr_assert_not(control_initialised());
	cr_assert_not(state_token_is_set());
}

Test(control, init_applies_token_envs_user_and_workdir)
{
	char ts[64];
	struct ht_resp r;
	char body[512];

	snprintf(body, sizeof(body),
		 "{\"accessToken\":\"tok-1\",\"envVars\":{\"A\":\"1\",\"B\":\"two\"},\"defaultUser\":\"alice\","
		 "\"defaultWorkdir\":\"/work\",\"timestamp\":\"%s\"}",
		 rfc3339_ago(1, ts, sizeof(ts)));
	r = init(body);
	cr_assert_eq(r.status, 204, "%s", r.body);
	cr_assert_str_eq(ht_header(&r, "Cache-Control"), "no-store");
	cr_assert_str_eq(ht_header(&r, "X-Envd-Version"), ENVD_VERSION);
	ht_free(&r);
	cr_assert(control_initialised());
	cr_assert(state_token_equals("tok-1", 5));
	cr_assert_str_eq(envstore_get("A"), "1");
	cr_assert_str_eq(envstore_get("B"), "two");
	cr_assert_str_eq(state_default_user(), "alice");
	cr_assert_str_eq(state_default_workdir(), "/work");
	int64_t ns;
	cr_assert_eq(control_parse_rfc3339(ts, &ns), 0);
	cr_assert_eq(state_last_init_ns, ns);
}

Test(control, an_empty_init_body_initialises_without_a_token)
{
	struct ht_resp r = init("");

	cr_assert_eq(r.status, 204);
	ht_free(&r);
	cr_assert(control_initialised());
	cr_assert_not(state_token_is_set());
}

Test(control, init_needs_the_current_token_once_one_is_set)
{
	struct ht_resp r = init("{\"accessToken\":\"first\",\"envVars\":{\"A\":\"1\"}}");

	cr_assert_eq(r.status, 204);
	ht_free(&r);
	/* Another token: refused, nothing changes. */
	r = init("{\"accessToken\":\"second\",\"envVars\":{\"A\":\"2\"}}");
	cr_assert_eq(r.status, 401);
	cr_assert_str_eq(r.body, "access token validation failed");
	ht_free(&r);
	cr_assert(state_token_equals("first", 5));
	cr_assert_str_eq(envstore_get("A"), "1");
	/* No token at all: a reset, which needs the metadata service. */
	r = init("{\"envVars\":{\"A\":\"3\"}}");
	cr_assert_eq(r.status, 401);
	cr_assert_str_eq(r.body, "access token reset not authorized");
	ht_free(&r);
	cr_assert(state_token_is_set());
	/* The current token: applied, and the env store replaced. */
	r = init("{\"accessToken\":\"first\",\"envVars\":{\"C\":\"3\"}}");
	cr_assert_eq(r.status, 204);
	ht_free(&r);
	cr_assert_str_eq(envstore_get("C"), "3");
	cr_assert_null(envstore_get("A"));
}

Test(control, an_older_init_is_answered_but_not_applied)
{
	char ts[64], body[256];
	struct ht_resp r;

	snprintf(body, sizeof(body), "{\"envVars\":{\"A\":\"new\"},\"timestamp\":\"%s\"}",
		 rfc3339_ago(1, ts, sizeof(ts)));
	r = init(body);
	cr_assert_eq(r.status, 204);
	ht_free(&r);
	int64_t applied = state_last_init_ns;
	snprintf(body, sizeof(body), "{\"envVars\":{\"A\":\"old\"},\"timestamp\":\"%s\"}",
		 rfc3339_ago(3, ts, sizeof(ts)));
	r = init(body);
	cr_assert_eq(r.status, 204);
	ht_free(&r);
	cr_assert_str_eq(envstore_get("A"), "new");
	cr_assert_eq(state_last_init_ns, applied);
}

Test(control, init_installs_and_rotates_the_ca)
{
	struct ht_resp r = init("{\"caBundle\":\"-----CA ONE-----\\n\"}");
	char crt[300];

	cr_assert_eq(r.status, 204, "%s", r.body);
	ht_free(&r);
	cr_assert_str_eq(slurp(control_ca_bundle), "SYSTEM CA\n-----CA ONE-----\n");
	snprintf(crt, sizeof(crt), "%s/e2b-ca.crt", control_ca_dir);
	cr_assert_str_eq(slurp(crt), "-----CA ONE-----\n");
	/* The same CA again: nothing added. */
	r = init("{\"caBundle\":\"-----CA ONE-----\"}");
	cr_assert_eq(r.status, 204);
	ht_free(&r);
	cr_assert_str_eq(slurp(control_ca_bundle), "SYSTEM CA\n-----CA ONE-----\n");
	/* A new one: the previous leaves the bundle. */
	r = init("{\"caBundle\":\"-----CA TWO-----\"}");
	cr_assert_eq(r.status, 204);
	ht_free(&r);
	cr_assert_str_eq(slurp(control_ca_bundle), "SYSTEM CA\n-----CA TWO-----\n");
	cr_assert_str_eq(slurp(crt), "-----CA TWO-----\n");
}

Test(control, a_ca_that_cannot_be_installed_fails_the_init)
{
	struct ht_resp r;

	snprintf(control_ca_bundle, sizeof(control_ca_bundle), "%s/missing/bundle.crt", dir);
	r = init("{\"caBundle\":\"-----CA-----\"}");
	cr_assert_eq(r.status, 400);
	cr_assert(strstr(r.body, "failed to install CA bundle"), "%s", r.body);
	cr_assert(strstr(r.body, "missing/bundle.crt"), "%s", r.body);
	ht_free(&r);
}

Test(control, an_init_body_over_8_mib_is_refused)
{
	size_t n = (8u << 20) + 1;
	char *body = malloc(n + 1);

	cr_assert_not_null(body);
	memset(body, ' ', n);
	body[0] = '{';
	body[n - 1] = '}';
	body[n] = '\0';
	struct ht_resp r = init(body);
	cr_assert_eq(r.status, 400);
	ht_free(&r);
	free(body);
	cr_assert_not(control_initialised());
}

Test(control, upgrade_before_init_is_409)
{
	struct ht_resp r = ht_post(control_upgrade, "/upgrade", NULL, "");

	cr_assert_eq(r.status, 409);
	cr_assert(strstr(r.body, "envd not initialized"), "%s", r.body);
	ht_free(&r);
}

Test(control, collapse_answers_the_reference_shape)
{
	struct ht_resp r = ht_post(control_collapse, "/collapse", NULL, "");
	json_t *o;

	cr_assert_eq(r.status, 200);
	o = json_loads(r.body, 0, NULL);
	cr_assert(json_is_object(o), "%s", r.body);
	cr_assert(json_is_integer(json_object_get(o, "regions")));
	cr_assert(json_is_integer(json_object_get(o, "elapsedMs")));
	json_decref(o);
	ht_free(&r);
}

Test(control, rfc3339_parsing)
{
	int64_t ns;

	cr_assert_eq(control_parse_rfc3339("1970-01-01T00:00:01Z", &ns), 0);
	cr_assert_eq(ns, 1000000000LL);
	cr_assert_eq(control_parse_rfc3339("1970-01-01T01:00:00.5+01:00", &ns), 0);
	cr_assert_eq(ns, 500000000LL);
	cr_assert_eq(control_parse_rfc3339("2024-02-29t12:00:00-00:30", &ns), 0);
	cr_assert_eq(ns, (1709208000LL + 1800) * 1000000000LL);
	cr_assert_eq(control_parse_rfc3339("2024-13-01T00:00:00Z", &ns), -EINVAL);
	cr_assert_eq(control_parse_rfc3339("2024-01-01T00:00:00", &ns), -EINVAL);
	cr_assert_eq(control_parse_rfc3339("2024-01-01T00:00:00.Z", &ns), -EINVAL);
}
