/* sandbox_network: a sandbox's network policy (server/network/network.h)
 * through its life: resolved at create, attached after its container
 * starts, detached at every teardown, changed by sandbox_set_network(),
 * attached at a warm-pool claim (pooled sandboxes have none). */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"

/* How long a fresh resolver may take to answer (measured: a few ms). */
#define NET_READY_TIMEOUT_MS 3000

int sandbox_net_resolve(struct sandbox *sb, int pooled, struct err *e)
{
	if (sb->spec.network.json)
		return 0;
	/* Pooled ones get none, and a network at their claim. */
	return network_default_policy(pooled ? NULL : sb->owner->cfg.network, &sb->spec.network, e);
}

void sandbox_net_resolv_path(const struct sandbox *sb, char *buf, size_t size)
{
	sandbox_path(sb, buf, size, "resolv.conf");
}

static void set_policy(struct sandbox *sb, struct network_policy *p);

static void set_addr(struct sandbox *sb)
{
	pthread_mutex_lock(&sb->mu);
	snprintf(sb->net_addr, sizeof(sb->net_addr), "%s", sb->net ? network_address(sb->net) : "");
	pthread_mutex_unlock(&sb->mu);
}

/* `p` with the redirect to the egress proxy when the sandbox has secrets. */
static struct network_policy with_egress(const struct sandbox *sb, const struct network_policy *p)
{
	struct network_policy q = *p; /* shallow: not released */
	q.intercept_port = sandbox_secrets_port(sb);
	q.intercept_all = sb->owner->cfg.egress && egress_all(sb->owner->cfg.egress);
	return q;
}

static int attach(struct sandbox *sb, const struct network_policy *p, struct err *e)
{
	char resolv[PATH_MAX];
	sandbox_net_resolv_path(sb, resolv, sizeof(resolv));
	struct network_policy q = with_egress(sb, p);
	if (network_attach(sb->owner->cfg.network, sb->init_pid, &q, resolv, &sb->net, e) < 0)
		return err_code(e);
	set_addr(sb);
	if (sandbox_secrets_bind(sb, e) < 0) {
		sandbox_net_detach(sb);
		return err_code(e);
	}
	return 0;
}

int sandbox_net_attach(struct sandbox *sb, struct err *e)
{
	if (sb->spec.network.mode == NETWORK_NONE || sb->net)
		return 0;
	return attach(sb, &sb->spec.network, e);
}

int sandbox_net_reapply(struct sandbox *sb, struct err *e)
{
	if (!sb->net)
		return 0;
	sandbox_secrets_unbind(sb);
	struct network_policy q = with_egress(sb, &sb->spec.network);
	if (network_update(sb->owner->cfg.network, sb->net, &q, e) < 0) {
		sandbox_net_detach(sb);
		return err_code(e);
	}
	return sandbox_secrets_bind(sb, e) ?: sandbox_net_ready(sb, e);
}

int sandbox_net_ready(struct sandbox *sb, struct err *e)
{
	return sb->net ? network_wait_ready(sb->net, NET_READY_TIMEOUT_MS, e) : 0;
}

void sandbox_net_detach(struct sandbox *sb)
{
	if (!sb->net)
		return;
	sandbox_secrets_unbind(sb);
	network_detach(sb->owner->cfg.network, sb->net);
	sb->net = NULL;
	set_addr(sb);
}

int sandbox_net_claim(struct sandbox *sb, const struct sandbox_spec *req, struct err *e)
{
	struct network_policy p;
	if (req->network.json) {
		if (network_policy_copy(&p, &req->network, e) < 0)
			return err_code(e);
	} else if (network_default_policy(sb->owner->cfg.network, &p, e) < 0) {
		return err_code(e);
	}
	if (p.mode != NETWORK_NONE && (attach(sb, &p, e) < 0 || sandbox_net_ready(sb, e) < 0)) {
		sandbox_net_detach(sb);
		network_policy_release(&p);
		return err_code(e);
	}
	set_policy(sb, &p);
	return 0;
}

void sandbox_net_json(struct sandbox *sb, cJSON *j)
{
	pthread_mutex_lock(&sb->mu);
	cJSON *v = sb->spec.network.json ? cJSON_Duplicate(sb->spec.network.json, 1)
					 : cJSON_CreateString("none");
	pthread_mutex_unlock(&sb->mu);
	if (v)
		cJSON_AddItemToObject(j, "network", v);
}

void sandbox_net_json_address(struct sandbox *sb, cJSON *j)
{
	char addr[sizeof(sb->net_addr)];
	pthread_mutex_lock(&sb->mu);
	memcpy(addr, sb->net_addr, sizeof(addr));
	pthread_mutex_unlock(&sb->mu);
	if (addr[0])
		cJSON_AddStringToObject(j, "network_address", addr);
}

/* Replaces the spec's policy with `p` (taken); under op, and mu for the
 * JSON view. */
static void set_policy(struct sandbox *sb, struct network_policy *p)
{
	pthread_mutex_lock(&sb->mu);
	struct network_policy old = sb->spec.network;
	sb->spec.network = *p;
	pthread_mutex_unlock(&sb->mu);
	memset(p, 0, sizeof(*p));
	network_policy_release(&old);
}

/* Applies `p` to the running sandbox: attach, update or detach. */
static int apply_running(struct sandbox *sb, const struct network_policy *p, struct err *e)
{
	if (p->mode == NETWORK_NONE) {
		sandbox_net_detach(sb);
		return 0;
	}
	if (!sb->net)
		return attach(sb, p, e) ?: sandbox_net_ready(sb, e);
	struct network_policy q = with_egress(sb, p);
	if (network_update(sb->owner->cfg.network, sb->net, &q, e) < 0) {
		/* Half a policy is none: no filter, no resolver. */
		sandbox_net_detach(sb);
		return err_code(e);
	}
	return sandbox_net_ready(sb, e);
}

int sandbox_set_network(struct sandboxes *s, const char *id, const cJSON *v, struct sandbox **out,
			struct err *e)
{
	if (!v)
		return err_set(e, ERR_INVALID, EINVAL, "field 'network' is required");
	struct network_policy p;
	if (network_policy_parse(v, &p, e) < 0)
		return err_code(e);
	if (!p.json || (p.mode != NETWORK_NONE && !s->cfg.network)) {
		network_policy_release(&p);
		return p.json ? err_set(e, ERR_UNAVAILABLE, ENOTSUP,
					"networking is not set up in deskboxd")
			      : err_set(e, ERR_INVALID, EINVAL, "field 'network' is required");
	}
	struct sandbox *sb;
	if (sandbox_get(s, id, &sb, e) < 0) {
		network_policy_release(&p);
		return err_code(e);
	}
	pthread_rwlock_wrlock(&sb->op);
	pthread_mutex_lock(&sb->mu);
	enum sandbox_status st = sb->status;
	pthread_mutex_unlock(&sb->mu);
	int r = 0;
	if (st == SANDBOX_DELETING)
		r = err_set(e, ERR_NOT_FOUND, ENOENT, "no sandbox '%s'", sb->id);
	else if (st == SANDBOX_CREATING)
		r = err_set(e, ERR_CONFLICT, EBUSY, "sandbox '%s' is being created", sb->id);
	else if (st == SANDBOX_RUNNING)
		r = apply_running(sb, &p, e);
	if (r == 0) {
		set_policy(sb, &p);
		r = sandbox_persist(sb, st, e);
	}
	network_policy_release(&p);
	pthread_rwlock_unlock(&sb->op);
	if (r < 0) {
		sandbox_put(sb);
		return err_wrap(e, "changing the network of sandbox '%s'", id);
	}
	*out = sb;
	return 0;
}
