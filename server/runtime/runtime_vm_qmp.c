/* runtime_vm_qmp: deskboxd's end of a VM's QMP socket (<run>/qmp.sock,
 * QEMU's machine protocol: one JSON object a line).  A connection per
 * call: the greeting, qmp_capabilities, the commands; events between the
 * answers are skipped.  What QEMU says is bounded (a line of at most
 * QMP_LINE_MAX bytes, parsed by cJSON), and each read has a deadline, so a
 * QEMU that stops answering (its guest's balloon driver is not under
 * QEMU's control) costs a timeout, never a hang. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/clock.h"
#include "internal.h"

#define QMP_LINE_MAX   65536
#define QMP_TIMEOUT_MS 5000

struct qmp {
	int fd;
	size_t len;
	char buf[QMP_LINE_MAX];
};

/* The next JSON line, by `deadline` (clock_mono_ms). */
static cJSON *qmp_read(struct qmp *q, long long deadline, struct err *e)
{
	for (;;) {
		char *nl = memchr(q->buf, '\n', q->len);
		if (nl) {
			*nl = '\0';
			cJSON *j = cJSON_Parse(q->buf);
			size_t used = (size_t)(nl - q->buf) + 1;
			memmove(q->buf, nl + 1, q->len - used);
			q->len -= used;
			if (!j)
				err_set(e, ERR_INTERNAL, EPROTO, "VM: QEMU's QMP said no JSON");
			return j;
		}
		if (q->len == sizeof(q->buf))
			return err_set(e, ERR_INTERNAL, EPROTO, "VM: a QMP line too long"), NULL;
		long long left = deadline - clock_mono_ms();
		struct pollfd p = {.fd = q->fd, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return err_set(e, ERR_UNAVAILABLE, ETIMEDOUT,
				       "VM: QEMU's QMP did not answer in time"),
			       NULL;
		ssize_t n = read(q->fd, q->buf + q->len, sizeof(q->buf) - q->len);
		if (n <= 0)
			return err_set(e, ERR_UNAVAILABLE, EPIPE, "VM: QEMU's QMP closed"), NULL;
		q->len += (size_t)n;
	}
}

/* Sends `cmd` (a JSON object) and returns its "return" (the caller's), or
 * NULL with e set (QEMU's "error" as its message). */
static cJSON *qmp_cmd(struct qmp *q, const char *cmd, struct err *e)
{
	size_t n = strlen(cmd);
	if (write(q->fd, cmd, n) != (ssize_t)n || write(q->fd, "\n", 1) != 1)
		return err_sys(e, ERR_UNAVAILABLE, errno, "VM: writing to QEMU's QMP"), NULL;
	long long deadline = clock_mono_ms() + QMP_TIMEOUT_MS;
	for (;;) {
		cJSON *j = qmp_read(q, deadline, e);
		if (!j)
			return NULL;
		cJSON *ret = cJSON_DetachItemFromObjectCaseSensitive(j, "return");
		const cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");
		const cJSON *desc = cJSON_GetObjectItemCaseSensitive(err, "desc");
		if (err)
			err_set(e, ERR_UNAVAILABLE, EIO, "VM: QEMU refused: %.200s",
				cJSON_IsString(desc) ? desc->valuestring : "(no reason)");
		cJSON_Delete(j);
		if (ret || err)
			return ret;
		/* an event: the next line */
	}
}

static int qmp_open(struct qmp *q, const char *run, struct err *e)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/qmp.sock", run) >=
	    sizeof(sa.sun_path))
		return err_set(e, ERR_INTERNAL, ENAMETOOLONG, "VM: the QMP socket's path is long");
	q->len = 0;
	q->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (q->fd < 0 || connect(q->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return err_sys(e, ERR_UNAVAILABLE, errno, "VM: connecting to QEMU's QMP");
	cJSON *hello = qmp_read(q, clock_mono_ms() + QMP_TIMEOUT_MS, e);
	int ok = hello && cJSON_GetObjectItemCaseSensitive(hello, "QMP");
	cJSON_Delete(hello);
	if (!ok)
		return err_code(e) ?: err_set(e, ERR_INTERNAL, EPROTO, "VM: no QMP greeting");
	cJSON *r = qmp_cmd(q, "{\"execute\":\"qmp_capabilities\"}", e);
	if (!r)
		return err_code(e);
	cJSON_Delete(r);
	return 0;
}

static uint64_t num(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsNumber(v) && v->valuedouble > 0 ? (uint64_t)v->valuedouble : 0;
}

/* The guest's RAM now (what the balloon leaves it), in MiB. */
static int balloon_actual(struct qmp *q, uint64_t *mb, struct err *e)
{
	cJSON *r = qmp_cmd(q, "{\"execute\":\"query-balloon\"}", e);
	if (!r)
		return err_code(e);
	*mb = num(r, "actual") >> 20;
	cJSON_Delete(r);
	return 0;
}

int runtime_vm_qmp_memory(const char *run, uint64_t *base_mb, uint64_t *now_mb, struct err *e)
{
	struct qmp *q = calloc(1, sizeof(*q));
	if (!q)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	int rc = qmp_open(q, run, e);
	cJSON *r = rc == 0 ? qmp_cmd(q, "{\"execute\":\"query-memory-size-summary\"}", e) : NULL;
	if (rc == 0 && !r)
		rc = err_code(e);
	*base_mb = num(r, "base-memory") >> 20;
	cJSON_Delete(r);
	if (rc == 0)
		rc = balloon_actual(q, now_mb, e);
	if (q->fd >= 0)
		close(q->fd);
	free(q);
	return rc;
}

int runtime_vm_qmp_balloon(const char *run, uint64_t mem_mb, int timeout_ms, uint64_t *now_mb,
			   struct err *e)
{
	struct err quiet = ERR_INIT;
	if (!e)
		e = &quiet;
	struct qmp *q = calloc(1, sizeof(*q));
	if (!q)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "{\"execute\":\"balloon\",\"arguments\":{\"value\":%llu}}",
		 (unsigned long long)mem_mb << 20);
	int rc = qmp_open(q, run, e);
	cJSON *r = rc == 0 ? qmp_cmd(q, cmd, e) : NULL;
	if (rc == 0 && !r)
		rc = err_code(e);
	cJSON_Delete(r);
	/* The guest's driver gives the pages (or takes them back) at its
	 * pace (~36 MiB/s under emulation on a loaded host): it goes on after
	 * the wait. */
	long long deadline = clock_mono_ms() + timeout_ms;
	uint64_t now = 0;
	while (rc == 0 && (rc = balloon_actual(q, &now, e)) == 0 && now != mem_mb &&
	       clock_mono_ms() < deadline)
		clock_sleep_ms(50);
	if (now_mb)
		*now_mb = now;
	if (q->fd >= 0)
		close(q->fd);
	free(q);
	return rc;
}
