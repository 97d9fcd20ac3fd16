/* Sessions (process.h): a persistent bash per session running one command
 * at a time, each framed by a random marker.  The shape follows Python
 * contexts (process_ctx.c): a busy lock per session, a fresh shell when the
 * old one hung or died. */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/fs.h"
#include "common/text.h"

#define MARK_HEX 32
/* The marker line: MARK, a space, $? (at most 3 digits), a newline. */
#define WIN_MAX (MARK_HEX + 16)

/* The shell's loop.  Each request is one line: the marker, a space and the
 * command in base64 (so any bytes, newlines included, arrive intact).  The
 * command runs through eval in this very shell, with fd 3 (the requests)
 * closed and stdin /dev/null, so it can neither read nor take the next
 * request.  Names start with __dbx_ to stay out of the user's way. */
static const char driver[] = "exec 3<&0 </dev/null\n"
			     "while IFS=' ' read -r -u 3 __dbx_m __dbx_c; do\n"
			     "  __dbx_c=$(printf '%s' \"$__dbx_c\" | base64 -d) || __dbx_c=false\n"
			     "  eval \"$__dbx_c\" 3<&-\n"
			     "  __dbx_rc=$?\n"
			     "  printf '%s %d\\n' \"$__dbx_m\" \"$__dbx_rc\"\n"
			     "  printf '%s\\n' \"$__dbx_m\" >&2\n"
			     "done\n";

struct process_session {
	struct process_session_info info;
	struct process_session *next; /* in the table, under table->mu */
	int refs;		      /* under table->mu */
	int gone;
	pthread_mutex_t busy;	 /* one command at a time */
	struct process_run *run; /* the shell, under busy */
	char *cwd;		 /* for a restart */
	char **env;
};

/* One stream of one command's output, until its marker. */
struct sstream {
	char *buf;
	size_t len, max;
	uint64_t seen; /* bytes of the stream so far */
	char win[WIN_MAX];
	size_t wlen;
	int done, rc, truncated;
};

struct collect {
	char mark[MARK_HEX + 1];
	struct sstream s[2]; /* stdout, stderr */
};

static void session_unref(struct process_table *t, struct process_session *c)
{
	pthread_mutex_lock(&t->mu);
	int last = --c->refs == 0;
	pthread_mutex_unlock(&t->mu);
	if (!last)
		return;
	process_run_free(c->run);
	pthread_mutex_destroy(&c->busy);
	for (size_t i = 0; c->env && c->env[i]; i++)
		free(c->env[i]);
	free(c->env);
	free(c->cwd);
	free(c);
}

static int start_shell(struct process_table *t, struct process_session *c, int use, struct err *e)
{
	const char *argv[] = {"/bin/bash", "--noprofile",     "--norc", "-c",
			      driver,	   "deskbox-session", NULL};
	struct process_opts o = {
	    .argv = argv,
	    .env = (const char *const *)c->env,
	    .cwd = c->cwd,
	    .max_output = SIZE_MAX,
	    .keep_stdin_open = 1,
	    .root = c->info.root,
	};
	process_run_free(c->run);
	c->run = NULL;
	if (use && t->host.enter && t->host.enter(t->host.cls, e) < 0)
		return err_code(e);
	int r = process_start(t, &o, &c->run, e);
	if (use && t->host.leave)
		t->host.leave(t->host.cls);
	return r;
}

static int copy_opts(struct process_session *c, const struct process_opts *o)
{
	size_t n = 0;
	while (o->env && o->env[n])
		n++;
	c->env = calloc(n + 1, sizeof(char *));
	if (!c->env || (o->cwd && !(c->cwd = strdup(o->cwd))))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!(c->env[i] = strdup(o->env[i])))
			return -1;
	return 0;
}

int process_session_create(struct process_table *t, const struct process_opts *o,
			   struct process_session_info *info, struct err *e)
{
	pthread_mutex_lock(&t->mu);
	size_t n = 0;
	for (struct process_session *c = t->sessions; c; c = c->next)
		n++;
	pthread_mutex_unlock(&t->mu);
	if (n >= PROCESS_SESSION_MAX)
		return err_set(e, ERR_LIMIT, EAGAIN, "a sandbox has at most %d sessions",
			       PROCESS_SESSION_MAX);
	struct process_session *c = calloc(1, sizeof(*c));
	if (!c)
		return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	pthread_mutex_init(&c->busy, NULL);
	c->refs = 1;
	c->info.created_at_ms = clock_wall_ms();
	c->info.root = o->root;
	int r = copy_opts(c, o) < 0 ? err_set(e, ERR_INTERNAL, ENOMEM, "out of memory") : 0;
	if (r == 0)
		r = fs_random_hex(c->info.id, PROCESS_SESSION_ID_LEN / 2, e);
	if (r == 0 && start_shell(t, c, 0, e) < 0)
		r = err_wrap(e, "starting the session's shell");
	if (r < 0) {
		session_unref(t, c);
		return r;
	}
	pthread_mutex_lock(&t->mu);
	c->next = t->sessions;
	t->sessions = c;
	pthread_mutex_unlock(&t->mu);
	*info = c->info;
	return 0;
}

static struct process_session *session_find(struct process_table *t, const char *id)
{
	pthread_mutex_lock(&t->mu);
	struct process_session *c = t->sessions;
	while (c && strcmp(c->info.id, id) != 0)
		c = c->next;
	if (c)
		c->refs++;
	pthread_mutex_unlock(&t->mu);
	return c;
}

static int not_found(struct err *e, const char *id)
{
	return err_set(e, ERR_NOT_FOUND, ENOENT, "no session '%.*s'", UTF8_CUT(id, 64));
}

/* The first marker line in buf[0..len): "MARK" then, on stdout, a space
 * and $?, then a newline.  Its offset, or -1 (*rc set on a match). */
static long match_mark(const char *mark, const char *buf, size_t len, int is_out, int *rc)
{
	for (const char *p = buf; (p = memmem(p, len - (size_t)(p - buf), mark, MARK_HEX)); p++) {
		const char *q = p + MARK_HEX, *end = buf + len;
		*rc = 0;
		if (is_out) {
			if (q >= end || *q != ' ')
				continue;
			for (q++; q < end && *q >= '0' && *q <= '9' && *rc < 100000; q++)
				*rc = *rc * 10 + (*q - '0');
		}
		if (q < end && *q == '\n')
			return (long)(p - buf);
	}
	return -1;
}

/* Looks for the marker in the stream's last bytes joined to `data`, then
 * in `data`; on a match the stream ends where the marker starts. */
static void find_mark(struct collect *c, struct sstream *s, int is_out, const char *data, size_t n)
{
	char comb[2 * WIN_MAX];
	size_t head = n < WIN_MAX ? n : WIN_MAX;
	memcpy(comb, s->win, s->wlen);
	memcpy(comb + s->wlen, data, head);
	uint64_t data_off = s->seen - n; /* stream offset of data[0] */
	int rc;
	long at = match_mark(c->mark, comb, s->wlen + head, is_out, &rc);
	uint64_t off = at >= 0 ? data_off - s->wlen + (uint64_t)at : 0;
	if (at < 0 && (at = match_mark(c->mark, data, n, is_out, &rc)) >= 0)
		off = data_off + (uint64_t)at;
	if (at >= 0) {
		s->done = 1;
		s->rc = rc;
		s->truncated = off > s->max;
		if (s->len > off)
			s->len = (size_t)off;
		if (s->len > s->max)
			s->len = s->max;
		return;
	}
	/* The last WIN_MAX bytes of the stream. */
	if (n >= WIN_MAX) {
		memcpy(s->win, data + n - WIN_MAX, WIN_MAX);
		s->wlen = WIN_MAX;
	} else {
		size_t keep = s->wlen + n > WIN_MAX ? WIN_MAX - n : s->wlen;
		memmove(s->win, s->win + s->wlen - keep, keep);
		memcpy(s->win + keep, data, n);
		s->wlen = keep + n;
	}
}

static void collect_fn(void *cls, enum process_stream id, const char *data, size_t n)
{
	struct collect *c = cls;
	struct sstream *s = &c->s[id - 1];
	if (s->done)
		return; /* a background job's output after the marker */
	/* Kept up to the cap plus room for the marker, which is cut off. */
	size_t room = s->max + WIN_MAX > s->len ? s->max + WIN_MAX - s->len : 0;
	size_t k = n < room ? n : room;
	memcpy(s->buf + s->len, data, k);
	s->len += k;
	s->seen += n;
	find_mark(c, s, id == PROCESS_STDOUT, data, n);
}

/* The request line: marker, space, base64 of the command, newline. */
static char *request_line(const char *mark, const char *command, size_t *len)
{
	char *b64 = base64_encode(command, strlen(command));
	char *line = NULL;
	if (b64 && asprintf(&line, "%s %s\n", mark, b64) < 0)
		line = NULL;
	free(b64);
	if (line)
		*len = strlen(line);
	return line;
}

static int shell_alive(struct process_run *r)
{
	return r && !process_client_exited(r);
}

/* Sends the command and collects its output until both markers, the
 * deadline or the shell's end: 0 when the command completed, 1 when the
 * shell ended, 2 at the deadline. */
static int run_command(struct process_run *run, const char *line, size_t len, long long deadline,
		       struct collect *c)
{
	if (process_write(run, line, len, deadline) < 0)
		return shell_alive(run) ? 2 : 1;
	while (!(c->s[0].done && c->s[1].done)) {
		long long left = deadline - clock_mono_ms();
		if (left <= 0)
			return 2;
		if (process_step(run, left > 1000 ? 1000 : (int)left, collect_fn, c))
			return 1;
	}
	return 0;
}

/* The command's result out of `c` (buffers moved), with a note on stderr
 * when the shell had to go. */
static int fill_result(struct collect *c, int outcome, struct process_result *res)
{
	static const char *const notes[] = {
	    "", "\n[the session's shell exited; it was started afresh]\n",
	    "\n[the command timed out; the session was killed and started afresh]\n"};
	const char *note = notes[outcome];
	size_t nl = strlen(note);
	res->exit_code = outcome == 0 ? c->s[0].rc : -1;
	res->timed_out = outcome == 2;
	res->out = c->s[0].buf;
	res->out_len = c->s[0].len;
	res->out[res->out_len] = '\0';
	char *err = realloc(c->s[1].buf, c->s[1].len + nl + 1);
	if (!err)
		return -1;
	memcpy(err + c->s[1].len, note, nl + 1);
	res->err = err;
	res->err_len = c->s[1].len + nl;
	res->out_truncated = c->s[0].truncated || (!c->s[0].done && c->s[0].seen > c->s[0].max);
	res->err_truncated = c->s[1].truncated || (!c->s[1].done && c->s[1].seen > c->s[1].max);
	c->s[0].buf = c->s[1].buf = NULL;
	return 0;
}

static int collect_init(struct collect *c, size_t max, struct err *e)
{
	memset(c, 0, sizeof(*c));
	if (fs_random_hex(c->mark, MARK_HEX / 2, e) < 0)
		return err_code(e);
	for (int i = 0; i < 2; i++) {
		c->s[i].max = max;
		c->s[i].buf = malloc(max + WIN_MAX + 1);
		if (!c->s[i].buf)
			return err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	}
	return 0;
}

/* Runs the command in the locked session `c`. */
static int exec_locked(struct process_table *t, struct process_session *c, const char *command,
		       const struct process_opts *o, struct process_result *res, int *restarted,
		       struct err *e)
{
	if (!shell_alive(c->run)) {
		if (start_shell(t, c, 1, e) < 0)
			return err_wrap(e, "restarting session '%s'", c->info.id);
		*restarted = 1;
	}
	struct collect col;
	size_t len = 0;
	char *line = NULL;
	int r = collect_init(&col, o->max_output, e);
	if (r == 0 && !(line = request_line(col.mark, command, &len)))
		r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
	if (r == 0) {
		c->info.commands++;
		int outcome = run_command(c->run, line, len, clock_mono_ms() + o->timeout_ms, &col);
		if (fill_result(&col, outcome, res) < 0)
			r = err_set(e, ERR_INTERNAL, ENOMEM, "out of memory");
		if (outcome != 0) {
			if (outcome == 2)
				res->oom_killed = run_cgroup_oom_kills(&c->run->cg) > 0;
			*restarted = 1;
			if (start_shell(t, c, 1, e) < 0 && r == 0)
				r = err_wrap(e, "restarting session '%s'", c->info.id);
		}
	}
	free(line);
	free(col.s[0].buf);
	free(col.s[1].buf);
	return r;
}

int process_session_exec(struct process_table *t, const char *id, const char *command,
			 const struct process_opts *o, struct process_result *res, int *restarted,
			 struct err *e)
{
	memset(res, 0, sizeof(*res));
	*restarted = 0;
	struct process_session *c = session_find(t, id);
	if (!c)
		return not_found(e, id);
	if (pthread_mutex_trylock(&c->busy) != 0) {
		session_unref(t, c);
		return err_set(e, ERR_CONFLICT, EBUSY, "session '%s' is running another command",
			       id);
	}
	long long start = clock_mono_ms();
	int r = c->gone ? not_found(e, id) : exec_locked(t, c, command, o, res, restarted, e);
	res->duration_ms = clock_mono_ms() - start;
	pthread_mutex_unlock(&c->busy);
	session_unref(t, c);
	if (r < 0)
		process_result_release(res);
	return r;
}

/* Unlinks `c` (under t->mu) and kills its shell and all it started. */
static void unlink_locked(struct process_table *t, struct process_session *c)
{
	for (struct process_session **pp = &t->sessions; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	c->gone = 1;
}

/* Kills the shell of an unlinked session; a command running in it ends
 * at once. */
static void session_kill(struct process_table *t, struct process_session *c)
{
	pthread_mutex_lock(&c->busy);
	process_run_free(c->run);
	c->run = NULL;
	pthread_mutex_unlock(&c->busy);
	(void)t;
}

int process_session_delete(struct process_table *t, const char *id, struct err *e)
{
	pthread_mutex_lock(&t->mu);
	struct process_session *c = t->sessions;
	while (c && strcmp(c->info.id, id) != 0)
		c = c->next;
	if (c) {
		unlink_locked(t, c);
		/* A command running now ends now, not at its timeout. */
		if (c->run && c->run->cg_live)
			run_cgroup_kill(&c->run->cg);
	}
	pthread_mutex_unlock(&t->mu);
	if (!c)
		return not_found(e, id);
	session_kill(t, c);
	session_unref(t, c); /* the table's */
	return 0;
}

void process_session_drop_all(struct process_table *t)
{
	for (;;) {
		pthread_mutex_lock(&t->mu);
		struct process_session *c = t->sessions;
		if (c) {
			unlink_locked(t, c);
			if (c->run && c->run->cg_live)
				run_cgroup_kill(&c->run->cg);
		}
		pthread_mutex_unlock(&t->mu);
		if (!c)
			return;
		session_kill(t, c);
		session_unref(t, c);
	}
}

size_t process_session_list(struct process_table *t, struct process_session_info *out, size_t max)
{
	size_t n = 0;
	pthread_mutex_lock(&t->mu);
	for (struct process_session *c = t->sessions; c && n < max; c = c->next, n++) {
		out[n] = c->info;
		out[n].busy = pthread_mutex_trylock(&c->busy) != 0;
		if (!out[n].busy)
			pthread_mutex_unlock(&c->busy);
	}
	pthread_mutex_unlock(&t->mu);
	return n;
}
