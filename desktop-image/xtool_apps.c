/* deskbox-xtool: desktop entries (the freedesktop.org Desktop Entry
 * Specification) and default applications (its MIME Applications
 * Associations), read here inside the sandbox because their content is
 * the sandbox's.
 *
 *   apps              {"apps":[{"id","name","exec","categories":[...]}]}:
 *                     launchable entries (Type=Application, neither
 *                     NoDisplay nor Hidden)
 *   app-argv ID       {"id","argv":[...]}: Exec= of the entry ID (a
 *                     desktop-file id, ".desktop" optional, or else the one
 *                     entry whose Name is ID ignoring case) with its field
 *                     codes removed
 *   open-argv TARGET  {"id","mime","argv":[...]}: the default application
 *                     for an absolute path, a file:// URL or another URL
 *                     (x-scheme-handler/SCHEME), with the target in place of
 *                     %f %F %u %U or, when Exec has none, appended
 *
 * Entries come from $XDG_DATA_HOME/applications (~/.local/share) then each
 * of $XDG_DATA_DIRS (/usr/local/share:/usr/share); the first file with an
 * id wins.  Sub-directories (ids like "kde4-foo") are not read.  Defaults
 * come from mimeapps.list in $XDG_CONFIG_HOME (~/.config), $XDG_CONFIG_DIRS
 * (/etc/xdg) and the data dirs' applications/, [Default Applications] then
 * [Added Associations], then from the entries' MimeType=, for the type and
 * then its parents (shared-mime-info's subclasses).  MIME types of files
 * come from the glob patterns in mime/globs2; a file no pattern names is
 * text/plain when its first 4 KiB hold no NUL byte. */
#include <ctype.h>
#include <dirent.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/text.h"
#include "xtool.h"

#define MAX_ENTRY_BYTES (64 * 1024)
#define MAX_ENTRIES	1024
#define MAX_DIRS	16
#define MAX_ARGS	256
#define MAX_LINE	4096
#define MAX_MIME	256

struct entry {
	char id[256];
	char *name, *exec, *categories, *mimetypes; /* unescaped values */
	int app, nodisplay, hidden, terminal;
};

static struct entry *entries;
static size_t nentries;

static void free_entries(void)
{
	for (size_t i = 0; i < nentries; i++) {
		free(entries[i].name);
		free(entries[i].exec);
		free(entries[i].categories);
		free(entries[i].mimetypes);
	}
	free(entries);
	entries = NULL;
	nentries = 0;
}

/* `base` + `sub` for each directory of an XDG list variable (or `def`),
 * after the one home directory (`home_var`, or $HOME/`home_def`). */
static size_t xdg_dirs(const char *home_var, const char *home_def, const char *list_var,
		       const char *def, const char *sub, char out[][PATH_MAX], size_t max)
{
	size_t n = 0;
	const char *h = getenv(home_var), *home = getenv("HOME");
	if (h && *h == '/')
		snprintf(out[n++], PATH_MAX, "%s%s", h, sub);
	else if (home && *home == '/')
		snprintf(out[n++], PATH_MAX, "%s/%s%s", home, home_def, sub);
	const char *l = getenv(list_var);
	if (!l || !*l)
		l = def;
	while (*l && n < max) {
		size_t len = strcspn(l, ":");
		if (len > 0 && l[0] == '/' && len < PATH_MAX / 2)
			snprintf(out[n++], PATH_MAX, "%.*s%s", (int)len, l, sub);
		l += len + (l[len] == ':');
	}
	return n;
}

static size_t data_dirs(const char *sub, char out[][PATH_MAX], size_t max)
{
	return xdg_dirs("XDG_DATA_HOME", ".local/share", "XDG_DATA_DIRS",
			"/usr/local/share:/usr/share", sub, out, max);
}

/* The whole of a small file, NUL-terminated (caller frees), or NULL when it
 * cannot be read or is over `max` bytes. */
static char *read_small(const char *path, size_t max)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	char *buf = malloc(max + 1);
	size_t n = buf ? fread(buf, 1, max + 1, f) : 0;
	fclose(f);
	if (!buf || n > max) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

/* A string value with the spec's escapes (\s \n \t \r \\) undone. */
static char *unescape(const char *v)
{
	char *out = malloc(strlen(v) + 1), *o = out;
	for (; out && *v; v++) {
		if (*v != '\\' || !v[1]) {
			*o++ = *v;
			continue;
		}
		v++;
		*o++ = *v == 's'   ? ' '
		       : *v == 'n' ? '\n'
		       : *v == 't' ? '\t'
		       : *v == 'r' ? '\r'
				   : *v;
		if (!strchr("sntr\\", *v))
			o[-1] = '\\', *o++ = *v;
	}
	if (out)
		*o = '\0';
	return out;
}

static void entry_key(struct entry *en, const char *key, const char *val)
{
	char **slot = strcmp(key, "Name") == 0	       ? &en->name
		      : strcmp(key, "Exec") == 0       ? &en->exec
		      : strcmp(key, "Categories") == 0 ? &en->categories
		      : strcmp(key, "MimeType") == 0   ? &en->mimetypes
						       : NULL;
	if (slot && !*slot)
		*slot = unescape(val);
	else if (strcmp(key, "Type") == 0)
		en->app = strcmp(val, "Application") == 0;
	else if (strcmp(key, "NoDisplay") == 0)
		en->nodisplay = strcmp(val, "true") == 0;
	else if (strcmp(key, "Hidden") == 0)
		en->hidden = strcmp(val, "true") == 0;
	else if (strcmp(key, "Terminal") == 0)
		en->terminal = strcmp(val, "true") == 0;
}

/* Calls `fn` for each key=value line of the group `group` in `text`
 * (which it modifies).  Localized keys (Name[de]) are left out. */
static void key_file(char *text, const char *group, void (*fn)(void *, const char *, const char *),
		     void *ctx)
{
	int in = 0;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		while (isspace((unsigned char)*line))
			line++;
		size_t len = strlen(line);
		while (len && isspace((unsigned char)line[len - 1]))
			line[--len] = '\0';
		if (*line == '[') {
			in = len >= 2 && line[len - 1] == ']' && len - 2 == strlen(group) &&
			     strncmp(line + 1, group, len - 2) == 0;
			continue;
		}
		char *eq = strchr(line, '=');
		if (!in || *line == '#' || !eq)
			continue;
		char *k_end = eq;
		while (k_end > line && isspace((unsigned char)k_end[-1]))
			k_end--;
		*k_end = '\0';
		char *val = eq + 1;
		while (isspace((unsigned char)*val))
			val++;
		if (!strchr(line, '['))
			fn(ctx, line, val);
	}
}

static void entry_cb(void *ctx, const char *key, const char *val)
{
	entry_key(ctx, key, val);
}

static int seen(const char *id)
{
	for (size_t i = 0; i < nentries; i++)
		if (strcmp(entries[i].id, id) == 0)
			return 1;
	return 0;
}

static void load_dir(const char *dir)
{
	struct dirent **names;
	int n = scandir(dir, &names, NULL, alphasort);
	for (int i = 0; i < n; i++) {
		const char *f = names[i]->d_name;
		size_t len = strlen(f);
		struct entry en = {0};
		char path[PATH_MAX];
		char *text = NULL;
		if (nentries < MAX_ENTRIES && len > 8 && len - 8 < sizeof(en.id) &&
		    strcmp(f + len - 8, ".desktop") == 0) {
			memcpy(en.id, f, len - 8);
			snprintf(path, sizeof(path), "%s/%s", dir, f);
			text = seen(en.id) ? NULL : read_small(path, MAX_ENTRY_BYTES);
		}
		if (text) {
			key_file(text, "Desktop Entry", entry_cb, &en);
			entries[nentries++] = en;
		}
		free(text);
		free(names[i]);
	}
	if (n >= 0)
		free(names);
}

static void load_entries(void)
{
	entries = calloc(MAX_ENTRIES, sizeof(*entries));
	if (!entries)
		die("out of memory");
	atexit(free_entries);
	char dirs[MAX_DIRS][PATH_MAX];
	size_t n = data_dirs("/applications", dirs, MAX_DIRS);
	for (size_t i = 0; i < n; i++)
		load_dir(dirs[i]);
}

static int launchable(const struct entry *en)
{
	return en->app && !en->hidden && en->exec && *en->exec;
}

/* Prints `list` (semicolon separated) as a JSON array of strings. */
static void json_list(const char *list)
{
	putchar('[');
	int first = 1;
	while (list && *list) {
		size_t len = strcspn(list, ";");
		if (len) {
			printf(first ? "" : ",");
			json_str((const unsigned char *)list, len);
			first = 0;
		}
		list += len + (list[len] == ';');
	}
	putchar(']');
}

int cmd_apps(void)
{
	load_entries();
	printf("{\"apps\":[");
	int first = 1;
	for (size_t i = 0; i < nentries; i++) {
		const struct entry *en = &entries[i];
		if (!launchable(en) || en->nodisplay)
			continue;
		printf(first ? "{\"id\":" : ",{\"id\":");
		first = 0;
		json_cstr(en->id);
		printf(",\"name\":");
		json_cstr(en->name ? en->name : en->id);
		printf(",\"exec\":");
		json_cstr(en->exec);
		printf(",\"categories\":");
		json_list(en->categories);
		putchar('}');
	}
	printf("]}\n");
	return 0;
}

/* The arguments of an Exec= value (quoting as the spec has it: inside
 * double quotes, a backslash escapes " ` $ and \).  Field codes: %% is a
 * percent sign; %f %F %u %U become `target` (an argument that is only
 * one of them is dropped when there is no target); the others (%i %c %k
 * and the deprecated ones) are removed.  *files says whether one of
 * %f %F %u %U was there.  Returns the count; the strings are malloc'd. */
static size_t exec_argv(const char *exec, const char *target, char **argv, int *files)
{
	size_t n = 0, len = strlen(exec);
	*files = 0;
	for (const char *p = exec; *p && n < MAX_ARGS;) {
		if (*p == ' ' || *p == '\t') {
			p++;
			continue;
		}
		char *arg = malloc(len + (target ? strlen(target) : 0) + 1), *o = arg;
		if (!arg)
			die("out of memory");
		int quoted = *p == '"', codes = 0, text = quoted;
		p += quoted;
		for (; *p && (quoted ? *p != '"' : *p != ' ' && *p != '\t'); p++) {
			if (quoted && *p == '\\' && p[1] && strchr("\"`$\\", p[1])) {
				*o++ = *++p;
				text = 1;
			} else if (*p == '%' && p[1]) {
				char c = *++p;
				int file = c == 'f' || c == 'F' || c == 'u' || c == 'U';
				if (c == '%')
					*o++ = '%', text = 1;
				if (file && target)
					o = stpcpy(o, target), text = 1;
				*files |= file;
				codes++;
			} else {
				*o++ = *p;
				text = 1;
			}
		}
		p += quoted && *p == '"';
		*o = '\0';
		if (text || !codes)
			argv[n++] = arg;
		else
			free(arg);
	}
	return n;
}

static void print_argv(const struct entry *en, const char *mime, const char *target)
{
	char *argv[MAX_ARGS + 3];
	int files;
	size_t k = exec_argv(en->exec, target, argv + 2, &files), n = 2 + k;
	if (k == 0 || !argv[2][0])
		die("the entry '%.*s' has no program in Exec", UTF8_CUT(en->id, 64));
	if (target && !files && k < MAX_ARGS) {
		argv[n] = strdup(target);
		n += argv[n] != NULL;
	}
	char **args = argv + 2;
	if (en->terminal) {
		/* Terminal=true: the program runs in a terminal emulator,
		 * Debian's alternative when the image has it, else xterm. */
		argv[0] =
		    strdup(access("/usr/bin/x-terminal-emulator", X_OK) == 0 ? "x-terminal-emulator"
									     : "xterm");
		argv[1] = strdup("-e");
		if (!argv[0] || !argv[1])
			die("out of memory");
		args = argv;
	} else {
		n -= 2;
	}
	printf("{\"id\":");
	json_cstr(en->id);
	if (mime) {
		printf(",\"mime\":");
		json_cstr(mime);
	}
	printf(",\"argv\":[");
	for (size_t i = 0; i < n; i++) {
		printf(i ? "," : "");
		json_cstr(args[i]);
		free(args[i]);
	}
	printf("]}\n");
}

static const struct entry *find_id(const char *id)
{
	for (size_t i = 0; i < nentries; i++)
		if (strcmp(entries[i].id, id) == 0)
			return launchable(&entries[i]) ? &entries[i] : NULL;
	return NULL;
}

int cmd_app_argv(const char *id)
{
	load_entries();
	char want[256];
	snprintf(want, sizeof(want), "%s", id);
	size_t len = strlen(want);
	if (len > 8 && strcmp(want + len - 8, ".desktop") == 0)
		want[len - 8] = '\0';
	const struct entry *en = find_id(want);
	for (size_t i = 0; !en && i < nentries; i++) {
		const struct entry *c = &entries[i];
		if (!launchable(c) || c->nodisplay || !c->name || strcasecmp(c->name, id) != 0)
			continue;
		for (size_t j = i + 1; j < nentries; j++)
			if (launchable(&entries[j]) && !entries[j].nodisplay && entries[j].name &&
			    strcasecmp(entries[j].name, id) == 0)
				die("bad app '%.*s': entries '%.*s' and '%.*s' both have that "
				    "name",
				    UTF8_CUT(id, 64), UTF8_CUT(c->id, 64),
				    UTF8_CUT(entries[j].id, 64));
		en = c;
	}
	if (!en)
		die("no application '%.*s'", UTF8_CUT(id, 64));
	print_argv(en, NULL, NULL);
	return 0;
}

/* Whether `list` (semicolon separated) holds `item`. */
static int in_list(const char *list, const char *item)
{
	size_t n = strlen(item);
	while (list && *list) {
		size_t len = strcspn(list, ";");
		if (len == n && strncmp(list, item, n) == 0)
			return 1;
		list += len + (list[len] == ';');
	}
	return 0;
}

struct assoc {
	const char *mime;
	const struct entry *found;
};

static void assoc_cb(void *ctx, const char *key, const char *val)
{
	struct assoc *a = ctx;
	if (a->found || strcmp(key, a->mime) != 0)
		return;
	char id[256];
	while (*val && !a->found) {
		size_t len = strcspn(val, ";");
		size_t k = len >= 8 && strncmp(val + len - 8, ".desktop", 8) == 0 ? len - 8 : len;
		if (k > 0 && k < sizeof(id)) {
			memcpy(id, val, k);
			id[k] = '\0';
			a->found = find_id(id);
		}
		val += len + (val[len] == ';');
	}
}

/* The application for exactly `mime`, or NULL. */
static const struct entry *handler(const char *mime)
{
	char files[2 * MAX_DIRS][PATH_MAX];
	size_t n = xdg_dirs("XDG_CONFIG_HOME", ".config", "XDG_CONFIG_DIRS", "/etc/xdg",
			    "/mimeapps.list", files, MAX_DIRS);
	n += data_dirs("/applications/mimeapps.list", files + n, MAX_DIRS);
	static const char *const groups[] = {"Default Applications", "Added Associations"};
	for (int g = 0; g < 2; g++) {
		for (size_t i = 0; i < n; i++) {
			struct assoc a = {.mime = mime};
			char *text = read_small(files[i], MAX_ENTRY_BYTES);
			if (text)
				key_file(text, groups[g], assoc_cb, &a);
			free(text);
			if (a.found)
				return a.found;
		}
	}
	for (size_t i = 0; i < nentries; i++)
		if (launchable(&entries[i]) && in_list(entries[i].mimetypes, mime))
			return &entries[i];
	return NULL;
}

/* The MIME type of the file `path` by the globs2 patterns (the highest
 * weight, then the longest pattern), else by a look at its first bytes. */
static void file_mime(const char *path, const struct stat *st, char *mime)
{
	if (S_ISDIR(st->st_mode)) {
		strcpy(mime, "inode/directory");
		return;
	}
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	char dirs[MAX_DIRS][PATH_MAX], line[512];
	size_t n = data_dirs("/mime/globs2", dirs, MAX_DIRS);
	long best = -1;
	size_t best_len = 0;
	for (size_t i = 0; i < n; i++) {
		FILE *f = fopen(dirs[i], "re");
		while (f && fgets(line, sizeof(line), f)) {
			line[strcspn(line, "\n")] = '\0';
			char *type = strchr(line, ':'), *glob = type ? strchr(type + 1, ':') : NULL;
			if (*line == '#' || !glob)
				continue;
			*type++ = '\0';
			*glob++ = '\0';
			char *flags = strchr(glob, ':');
			if (flags)
				*flags++ = '\0';
			int cs = flags && strstr(flags, "cs");
			long w = strtol(line, NULL, 10);
			size_t gl = strlen(glob);
			if (strlen(type) < MAX_MIME && (w > best || (w == best && gl > best_len)) &&
			    fnmatch(glob, base, cs ? 0 : FNM_CASEFOLD) == 0) {
				best = w;
				best_len = gl;
				strcpy(mime, type);
			}
		}
		if (f)
			fclose(f);
	}
	if (best >= 0)
		return;
	char head[4096];
	FILE *f = fopen(path, "re");
	int text = f != NULL;
	if (f) {
		size_t got = fread(head, 1, sizeof(head), f);
		text = !memchr(head, 0, got);
		fclose(f);
	}
	strcpy(mime, text ? "text/plain" : "application/octet-stream");
}

/* Adds the parents of `mime` (shared-mime-info's subclasses) to `types`. */
static void parents(const char *mime, char types[][MAX_MIME], size_t *n, size_t max)
{
	char dirs[MAX_DIRS][PATH_MAX], line[512];
	size_t nd = data_dirs("/mime/subclasses", dirs, MAX_DIRS);
	for (size_t i = 0; i < nd; i++) {
		FILE *f = fopen(dirs[i], "re");
		while (f && fgets(line, sizeof(line), f) && *n < max) {
			line[strcspn(line, "\n")] = '\0';
			char *sp = strchr(line, ' ');
			if (!sp || strlen(sp + 1) >= MAX_MIME)
				continue;
			*sp = '\0';
			int dup = 0;
			for (size_t k = 0; k < *n; k++)
				dup |= strcmp(types[k], sp + 1) == 0;
			if (!dup && strcmp(line, mime) == 0)
				strcpy(types[(*n)++], sp + 1);
		}
		if (f)
			fclose(f);
	}
}

/* A file:// URL's path, percent-decoded, into `out` (PATH_MAX). */
static void url_path(const char *url, char *out)
{
	const char *p = url + 7;
	if (strncmp(p, "localhost/", 10) == 0)
		p += 9;
	if (*p != '/')
		die("bad target: a file URL needs an absolute path");
	size_t n = 0;
	for (; *p && *p != '?' && *p != '#' && n + 1 < PATH_MAX; p++) {
		unsigned v;
		if (*p == '%' && sscanf(p + 1, "%2x", &v) == 1 && isxdigit((unsigned char)p[1]) &&
		    isxdigit((unsigned char)p[2]) && v != 0) {
			out[n++] = (char)v;
			p += 2;
		} else {
			out[n++] = *p;
		}
	}
	out[n] = '\0';
}

int cmd_open_argv(const char *target)
{
	char types[16][MAX_MIME], path[PATH_MAX];
	size_t scheme = strspn(target, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				       "0123456789+.-");
	int is_url = scheme > 0 && target[scheme] == ':' && isalpha((unsigned char)target[0]);
	int is_file = is_url && strncasecmp(target, "file://", 7) == 0;
	if (is_url && !is_file) {
		if (scheme + 18 >= MAX_MIME)
			die("bad target: scheme too long");
		snprintf(types[0], MAX_MIME, "x-scheme-handler/%.*s", (int)scheme, target);
		for (char *c = types[0]; *c; c++)
			*c = (char)tolower((unsigned char)*c);
	} else {
		if (is_file)
			url_path(target, path);
		else if (target[0] != '/')
			die("bad target '%.*s': a path must be absolute", UTF8_CUT(target, 64));
		else
			snprintf(path, sizeof(path), "%s", target);
		struct stat st;
		if (stat(path, &st) != 0)
			die("no such file '%.*s'", UTF8_CUT(path, 200));
		file_mime(path, &st, types[0]);
	}
	load_entries();
	size_t n = 1;
	for (size_t i = 0; i < n; i++) {
		const struct entry *en = handler(types[i]);
		if (en) {
			print_argv(en, types[0], target);
			return 0;
		}
		parents(types[i], types, &n, 16);
	}
	die("no application opens '%.*s' (%s)", UTF8_CUT(target, 200), types[0]);
}
