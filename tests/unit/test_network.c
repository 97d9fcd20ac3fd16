/* The "network" value of a sandbox spec (server/network/network_policy.c):
 * what is accepted, how entries are parsed, and that every bad entry is
 * refused with a message naming it. */
#include <stdio.h>
#include <string.h>

#include "server/network/network.h"
#include "tests/harness.h"

static int parse(const char *json, struct network_policy *p, struct err *e)
{
	cJSON *j = cJSON_Parse(json);
	err_clear(e);
	int r = network_policy_parse(j, p, e);
	cJSON_Delete(j);
	return r;
}

static void refused(const char *json, const char *needle)
{
	struct network_policy p;
	struct err e = ERR_INIT;
	int r = parse(json, &p, &e);
	char name[300];
	snprintf(name, sizeof(name), "refused: %.120s (%.150s)", json, e.msg);
	ok(r < 0 && (e.kind == ERR_INVALID || e.kind == ERR_UNKNOWN_FIELD) && strstr(e.msg, needle),
	   name);
}

int main(void)
{
	struct network_policy p;
	struct err e = ERR_INIT;
	is_int(parse("\"none\"", &p, &e), 0, "none");
	is_int(p.mode, NETWORK_NONE, "none's mode");
	ok(p.json && cJSON_IsString(p.json), "none keeps its JSON");
	network_policy_release(&p);
	is_int(parse("\"internet\"", &p, &e), 0, "internet");
	is_int(p.mode, NETWORK_INTERNET, "internet's mode");
	network_policy_release(&p);
	is_int(network_policy_parse(NULL, &p, &e), 0, "absent");
	ok(p.json == NULL && p.mode == NETWORK_NONE, "absent: none, no JSON (the default applies)");

	is_int(parse("{\"allow\":[\"API.Example.com\",\"*.example.org\",\"203.0.113.9/24\","
		     "\"198.51.100.7:443\",\"10.1.2.3\"]}",
		     &p, &e),
	       0, "an allow list");
	is_int(p.mode, NETWORK_ALLOW, "allow's mode");
	is_int((int)p.n_rules, 5, "five rules");
	ok(p.rules[0].is_name && !strcmp(p.rules[0].name, "api.example.com"), "names fold case");
	ok(p.rules[1].wildcard && !strcmp(p.rules[1].name, "example.org"), "a wildcard");
	ok(!p.rules[2].is_name && p.rules[2].addr == 0xcb007100 && p.rules[2].prefix == 24,
	   "a network is masked");
	ok(p.rules[3].addr == 0xc6336407 && p.rules[3].prefix == 32 && p.rules[3].port == 443,
	   "an address with a port");
	struct network_policy c;
	is_int(network_policy_copy(&c, &p, &e), 0, "copy");
	ok(c.n_rules == 5 && c.rules != p.rules && cJSON_Compare(c.json, p.json, 1), "a deep copy");
	network_policy_release(&c);
	network_policy_release(&p);

	refused("\"intranet\"", "field 'network'");
	refused("7", "field 'network'");
	refused("{\"allow\":[]}", "1 to 64");
	refused("{\"allow\":\"x.test\"}", "array");
	refused("{\"deny\":[\"x.test\"]}", "'network.deny'");
	refused("{\"allow\":[\"x.test\", 5]}", "strings");
	refused("{\"allow\":[\"bad_name.test\"]}", "'bad_name.test'");
	refused("{\"allow\":[\"localhost\"]}", "'localhost'");
	refused("{\"allow\":[\"-a.test\"]}", "'-a.test'");
	refused("{\"allow\":[\"a-.test\"]}", "'a-.test'");
	refused("{\"allow\":[\"a..test\"]}", "'a..test'");
	refused("{\"allow\":[\"*.*.test\"]}", "'*.*.test'");
	refused("{\"allow\":[\"10.0.0.0/33\"]}", "'10.0.0.0/33'");
	refused("{\"allow\":[\"10.0.0\"]}", "'10.0.0'");
	refused("{\"allow\":[\"1.2.3.4:0\"]}", "'1.2.3.4:0'");
	refused("{\"allow\":[\"1.2.3.4:65536\"]}", "'1.2.3.4:65536'");
	refused("{\"allow\":[\"1.2.3.4:\"]}", "'1.2.3.4:'");
	refused("{\"allow\":[\"1.2.3.4/+8\"]}", "'1.2.3.4/+8'");
	refused("{\"allow\":[\"a.test\"],\"x\":1}", "'network.x'");
	char big[2048] = "{\"allow\":[";
	for (int i = 0; i < 65; i++)
		snprintf(big + strlen(big), sizeof(big) - strlen(big), "%s\"a%d.test\"",
			 i ? "," : "", i);
	strcat(big, "]}");
	refused(big, "1 to 64");
	char longname[400] = "{\"allow\":[\"";
	for (int i = 0; i < 5; i++)
		strcat(longname, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.");
	strcat(longname, "test\"]}");
	refused(longname, "not a DNS name");
	return done();
}
