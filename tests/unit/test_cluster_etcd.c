/* The etcd client against a real etcd (Debian etcd-server) that this test
 * starts on loopback with a scratch data dir: key-value calls, prefix
 * ranges, transactions racing for one key, leases expiring, and failover
 * from a member that does not answer to one that does. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "server/cluster/cluster.h"
#include "tests/harness.h"

static pid_t etcd_pid;
static char data_dir[] = "/tmp/deskbox-etcd-test-XXXXXX";

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return ntohs(a.sin_port);
}

static void stop_etcd(void)
{
	if (etcd_pid > 0) {
		kill(etcd_pid, SIGKILL);
		waitpid(etcd_pid, NULL, 0);
		etcd_pid = 0;
	}
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", data_dir);
	if (system(cmd) != 0)
		diag("could not remove the data dir");
}

static pid_t start_etcd(int client, int peer)
{
	char curl[64], purl[64], cluster[96], dir[128];
	snprintf(curl, sizeof(curl), "http://127.0.0.1:%d", client);
	snprintf(purl, sizeof(purl), "http://127.0.0.1:%d", peer);
	snprintf(cluster, sizeof(cluster), "t=%s", purl);
	snprintf(dir, sizeof(dir), "%s/data", data_dir);
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", 1);
		dup2(null, 1);
		dup2(null, 2);
		execlp("etcd", "etcd", "--name", "t", "--data-dir", dir, "--listen-client-urls",
		       curl, "--advertise-client-urls", curl, "--listen-peer-urls", purl,
		       "--initial-advertise-peer-urls", purl, "--initial-cluster", cluster,
		       (char *)NULL);
		_exit(127);
	}
	return pid;
}

static int wait_ready(struct etcd *c)
{
	for (int i = 0; i < 200; i++) {
		struct err e = ERR_INIT;
		struct etcd_kvs r;
		if (etcd_range(c, "/probe", 0, &r, &e) == 0) {
			etcd_kvs_free(&r);
			return 0;
		}
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	return -1;
}

static void test_kv(struct etcd *c)
{
	struct err e = ERR_INIT;
	is_int(etcd_put(c, "/t/a", "one", 3, 0, &e), 0, "put");
	is_int(etcd_put(c, "/t/b", "two\0x", 5, 0, &e), 0, "put a value holding a NUL");
	is_int(etcd_put(c, "/tz", "outside", 7, 0, &e), 0, "put outside the prefix");
	struct etcd_kv kv;
	is_int(etcd_get(c, "/t/a", &kv, &e), 1, "get finds the key");
	is_str(kv.value, "one", "its value");
	ok(kv.create_revision > 0 && kv.version == 1, "revision and version");
	etcd_kv_release(&kv);
	is_int(etcd_get(c, "/t/b", &kv, &e), 1, "get the binary value");
	ok(kv.value_len == 5 && memcmp(kv.value, "two\0x", 5) == 0, "binary value intact");
	etcd_kv_release(&kv);
	is_int(etcd_get(c, "/t/none", &kv, &e), 0, "a missing key: 0");
	struct etcd_kvs r;
	is_int(etcd_range(c, "/t/", 1, &r, &e), 0, "prefix range");
	is_int(r.n, 2, "two keys under the prefix");
	if (r.n == 2) {
		is_str(r.kv[0].key, "/t/a", "sorted: first");
		is_str(r.kv[1].key, "/t/b", "sorted: second");
	}
	ok(r.revision > 0, "the answer's revision");
	etcd_kvs_free(&r);
	is_int(etcd_range(c, "/t/", ETCD_PREFIX | ETCD_SERIALIZABLE, &r, &e), 0,
	       "a serializable prefix range (the member's own copy)");
	is_int(r.n, 2, "sees the same two keys");
	etcd_kvs_free(&r);
	cJSON *bad = cJSON_CreateObject();
	cJSON_AddStringToObject(bad, "key", "not base64 !");
	cJSON *ans = NULL;
	ok(etcd_call(c, "/v3/kv/range", bad, &ans, &e) < 0 && !ans, "a request etcd refuses fails");
	is_int(e.kind, ERR_INVALID, "as invalid, not as a member down");
	err_clear(&e);
	int64_t n = 0;
	is_int(etcd_delete(c, "/t/", 1, &n, &e), 0, "delete a prefix");
	is_int(n, 2, "both keys deleted");
	is_int(etcd_get(c, "/tz", &kv, &e), 1, "the key outside the prefix stays");
	etcd_kv_release(&kv);
}

/* Two "creates" for one key: the first txn wins, the second sees it taken. */
static void test_txn(struct etcd *c)
{
	struct err e = ERR_INIT;
	struct etcd_cmp free_slot = {"/slot/0", ETCD_CMP_CREATE, ETCD_EQUAL, 0, NULL};
	struct etcd_op take[] = {{ETCD_OP_PUT, "/slot/0", "A", 0, 0, 0},
				 {ETCD_OP_PUT, "/owner/A", "node1", 0, 0, 0}};
	struct etcd_op take_b[] = {{ETCD_OP_PUT, "/slot/0", "B", 0, 0, 0}};
	int won = -1;
	is_int(etcd_txn(c, &free_slot, 1, take, 2, NULL, 0, &won, &e), 0, "txn A");
	is_int(won, 1, "A takes the free slot");
	is_int(etcd_txn(c, &free_slot, 1, take_b, 1, NULL, 0, &won, &e), 0, "txn B");
	is_int(won, 0, "B finds it taken");
	struct etcd_kv kv;
	etcd_get(c, "/slot/0", &kv, &e);
	is_str(kv.value, "A", "the slot is A's");
	int64_t mod = kv.mod_revision;
	etcd_kv_release(&kv);
	is_int(etcd_get(c, "/owner/A", &kv, &e), 1, "the success ops all ran");
	etcd_kv_release(&kv);
	struct etcd_cmp same = {"/slot/0", ETCD_CMP_MOD, ETCD_EQUAL, mod, NULL};
	struct etcd_op bump[] = {{ETCD_OP_PUT, "/slot/0", "A2", 0, 0, 0}};
	is_int(etcd_txn(c, &same, 1, bump, 1, NULL, 0, &won, &e), 0, "compare on mod revision");
	is_int(won, 1, "unchanged since read: succeeds");
	is_int(etcd_txn(c, &same, 1, bump, 1, NULL, 0, &won, &e), 0, "again with the old revision");
	is_int(won, 0, "changed since: fails");
	struct etcd_cmp val = {"/slot/0", ETCD_CMP_VALUE, ETCD_EQUAL, 0, "A2"};
	struct etcd_op del[] = {{ETCD_OP_DELETE, "/slot/", NULL, 0, 0, 1}};
	is_int(etcd_txn(c, &val, 1, del, 1, NULL, 0, &won, &e), 0, "compare on value");
	is_int(won, 1, "value matched, prefix deleted");
	is_int(etcd_get(c, "/slot/0", &kv, &e), 0, "the slot is free again");
}

static void test_lease(struct etcd *c)
{
	struct err e = ERR_INIT;
	int64_t id = 0, ttl = -1;
	is_int(etcd_lease_grant(c, 2, &id, &e), 0, "lease grant");
	ok(id != 0, "a lease id");
	is_int(etcd_put(c, "/node/x", "{}", 2, id, &e), 0, "put with the lease");
	struct etcd_kv kv;
	etcd_get(c, "/node/x", &kv, &e);
	is_int(kv.lease, id, "the key carries the lease");
	etcd_kv_release(&kv);
	is_int(etcd_lease_keepalive(c, id, &ttl, &e), 0, "keepalive");
	ok(ttl > 0 && ttl <= 2, "TTL refreshed");
	/* Not kept alive: gone within TTL + a second of etcd's lease checks. */
	int gone = 0;
	for (int i = 0; i < 80 && !gone; i++) {
		gone = etcd_get(c, "/node/x", &kv, &e) == 0;
		if (!gone) {
			etcd_kv_release(&kv);
			struct timespec ts = {0, 50 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
	ok(gone, "the key went with its lease");
	is_int(etcd_lease_keepalive(c, id, &ttl, &e), 0, "keepalive of an expired lease answers");
	is_int(ttl, 0, "with TTL 0");
	is_int(etcd_lease_grant(c, 30, &id, &e), 0, "another lease");
	etcd_put(c, "/node/y", "{}", 2, id, &e);
	is_int(etcd_lease_revoke(c, id, &e), 0, "revoke");
	is_int(etcd_get(c, "/node/y", &kv, &e), 0, "its key went at once");
}

static void test_failover(int client)
{
	struct err e = ERR_INIT;
	struct etcd *c;
	int dead = free_port();
	char eps[128];
	snprintf(eps, sizeof(eps), "etcd://127.0.0.1:%d,127.0.0.1:%d", dead, client);
	is_int(etcd_open(&c, eps, 1000, &e), 0, "open with a dead member first");
	is_int(etcd_n_endpoints(c), 2, "two endpoints");
	is_int(etcd_put(c, "/f", "v", 1, 0, &e), 0, "the live member answers");
	struct etcd_kv kv;
	is_int(etcd_get(c, "/f", &kv, &e), 1, "and keeps answering");
	etcd_kv_release(&kv);
	etcd_close(c);
	snprintf(eps, sizeof(eps), "127.0.0.1:%d,127.0.0.1:%d", dead, free_port());
	etcd_open(&c, eps, 500, &e);
	ok(etcd_put(c, "/f", "v", 1, 0, &e) < 0, "no member answers: fails");
	is_int(e.kind, ERR_UNAVAILABLE, "as unavailable");
	etcd_close(c);
	ok(etcd_open(&c, "http://x:1", 500, &e) < 0, "another scheme refused");
	ok(etcd_open(&c, "etcd://h1:1,,h2:2", 500, &e) < 0, "an empty member refused");
	ok(etcd_open(&c, "etcd://h1", 500, &e) < 0, "a member without a port refused");
}

int main(void)
{
	if (system("command -v etcd >/dev/null 2>&1") != 0)
		skip_all("etcd is not installed (Debian etcd-server; scripts/install-deps.sh)");
	if (!mkdtemp(data_dir))
		skip_all("no scratch directory");
	int client = free_port(), peer = free_port();
	etcd_pid = start_etcd(client, peer);
	struct err e = ERR_INIT;
	struct etcd *c;
	char eps[64];
	snprintf(eps, sizeof(eps), "127.0.0.1:%d", client);
	int up = etcd_open(&c, eps, 2000, &e) == 0 && wait_ready(c) == 0;
	if (!ok(up, "etcd started and answers")) {
		stop_etcd();
		return done();
	}
	test_kv(c);
	test_txn(c);
	test_lease(c);
	test_failover(client);
	etcd_close(c);
	stop_etcd();
	return done();
}
