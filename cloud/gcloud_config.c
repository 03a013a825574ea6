/*
 * gcloud_config.c: gcloud's properties (see cloud.h), read the way gcloud
 * reads them: its configuration files are Python configparser INI files
 * ("[section]", "name = value" or "name: value", "#" and ";" comment
 * lines, indented lines continue a value, names case-insensitive), and a
 * duplicate section or name makes gcloud itself fail, so it is an error
 * here too rather than a silent guess.
 */
#include "cloud/cloud.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* gcloud's files are tiny; the cap stops a wrong path from being read. */
#define CONFIG_MAX (1024 * 1024)
#define FIX "edit the file, or set the value again with `gcloud config set`"

/* path's contents into b; *absent when there is no such file. */
static int read_small(const char *path, struct buf *b, bool *absent,
		      struct err *e)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int rc = 0;

	*absent = false;
	if (fd == -1 && (errno == ENOENT || errno == ENOTDIR)) {
		*absent = true;
		return 0;
	}
	if (fd == -1)
		return err_errno(e, CLOUD_EIO, errno, "gcloud configuration %s",
				 path);
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode) ||
	    st.st_size > CONFIG_MAX) {
		close(fd);
		return err_set(e, CLOUD_EIO, "gcloud configuration %s: not a "
			       "regular file of at most 1 MiB", path);
	}
	if (buf_reserve(b, (size_t)st.st_size)) {
		close(fd);
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	while (b->len < (size_t)st.st_size) {
		ssize_t n = read(fd, b->data + b->len,
				 (size_t)st.st_size - b->len);

		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1) {
			rc = err_errno(e, CLOUD_EIO, errno,
				       "gcloud configuration %s", path);
			break;
		}
		if (n == 0)
			break;
		b->len += (size_t)n;
	}
	close(fd);
	if (!rc)
		b->data[b->len] = '\0';
	return rc;
}

static char *strip(char *s)
{
	char *end = s + strlen(s);

	while (*s && isspace((unsigned char)*s))
		s++;
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

static bool seen(struct strlist *l, const char *name, bool fold)
{
	for (size_t i = 0; i < l->n; i++)
		if (fold ? strcasecmp(l->v[i], name) == 0
			 : strcmp(l->v[i], name) == 0)
			return true;
	return false;
}

/* What a lookup is after while the file is parsed. */
struct want {
	const char *section, *key;
	char *out;
	size_t len;
};

/* Parses text (modified in place) and copies the wanted value out. */
static int parse(const char *path, char *text, const struct want *w,
		 struct err *e)
{
	struct strlist sections, names;
	const char *section = NULL;
	bool in_wanted = false, last_wanted = false, last_option = false;
	unsigned lineno = 0;
	char *next = text;
	int rc = 0;

	strlist_init(&sections);
	strlist_init(&names);
	while (!rc && next) {
		char *line = next, *s, *delim;
		bool indented;

		lineno++;
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		indented = *line == ' ' || *line == '\t';
		s = strip(line);
		if (!*s || *s == '#' || *s == ';')
			continue;
		if (indented && last_option) {
			/* A value that goes on: gcloud would read both
			 * lines, which no project or zone can be. */
			if (last_wanted)
				rc = err_set(e, CLOUD_EINVAL,
					     "gcloud configuration %s line %u: "
					     "the value of [%s] %s spans lines; "
					     FIX, path, lineno, w->section,
					     w->key);
			continue;
		}
		last_option = last_wanted = false;
		if (*s == '[') {
			size_t n = strlen(s);

			if (n < 3 || s[n - 1] != ']') {
				rc = err_set(e, CLOUD_EINVAL,
					     "gcloud configuration %s line %u: "
					     "a section header is \"[name]\"; "
					     FIX, path, lineno);
				break;
			}
			s[n - 1] = '\0';
			s++;
			if (seen(&sections, s, false)) {
				rc = err_set(e, CLOUD_EINVAL,
					     "gcloud configuration %s line %u: "
					     "section [%s] appears twice; merge "
					     "them", path, lineno, s);
				break;
			}
			if (strlist_push(&sections, s)) {
				rc = err_set(e, CLOUD_ENOMEM, "out of memory");
				break;
			}
			section = s;
			in_wanted = strcmp(s, w->section) == 0;
			strlist_release(&names);
			strlist_init(&names);
			continue;
		}
		delim = strpbrk(s, "=:");
		if (!delim || delim == s) {
			rc = err_set(e, CLOUD_EINVAL,
				     "gcloud configuration %s line %u: not "
				     "\"[section]\", \"name = value\" or a "
				     "comment; " FIX, path, lineno);
			break;
		}
		if (!section) {
			rc = err_set(e, CLOUD_EINVAL,
				     "gcloud configuration %s line %u: a "
				     "property before any \"[section]\"; " FIX,
				     path, lineno);
			break;
		}
		*delim = '\0';
		s = strip(s);
		if (seen(&names, s, true)) {
			rc = err_set(e, CLOUD_EINVAL,
				     "gcloud configuration %s line %u: [%s] "
				     "%s is set twice; keep one", path, lineno,
				     section, s);
			break;
		}
		if (strlist_push(&names, s)) {
			rc = err_set(e, CLOUD_ENOMEM, "out of memory");
			break;
		}
		last_option = true;
		if (!in_wanted || strcasecmp(s, w->key) != 0)
			continue;
		last_wanted = true;
		s = strip(delim + 1);
		if (strlen(s) >= w->len)
			rc = err_set(e, CLOUD_EINVAL,
				     "gcloud configuration %s line %u: [%s] "
				     "%s is longer than %zu bytes; " FIX, path,
				     lineno, w->section, w->key, w->len - 1);
		else
			memcpy(w->out, s, strlen(s) + 1);
	}
	strlist_release(&sections);
	strlist_release(&names);
	return rc;
}

/* gcloud's own rule for configuration names, which also keeps the name
 * from leaving the configurations directory. */
static bool name_valid(const char *s)
{
	if (!(*s >= 'a' && *s <= 'z'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
		      *s == '-'))
			return false;
	return true;
}

int gcloud_config_get(const char *section, const char *key, char *out,
		      size_t len, struct err *e)
{
	const char *dir = getenv("CLOUDSDK_CONFIG");
	const char *home = getenv("HOME");
	const char *name = getenv("CLOUDSDK_ACTIVE_CONFIG_NAME");
	const char *from = "CLOUDSDK_ACTIVE_CONFIG_NAME";
	struct want w = { section, key, out, len };
	struct buf base, path, text;
	bool absent;
	int rc;

	if (len)
		out[0] = '\0';
	if (!len)
		return err_set(e, CLOUD_EINVAL, "gcloud_config_get: no room");
	buf_init(&base);
	buf_init(&path);
	buf_init(&text);
	if (dir && *dir)
		rc = buf_appends(&base, dir);
	else if (home && *home)
		rc = buf_appendf(&base, "%s/.config/gcloud", home);
	else
		return 0;
	if (rc)
		goto nomem;
	if (!name || !*name) {
		if (buf_appendf(&path, "%s/active_config", base.data))
			goto nomem;
		rc = read_small(path.data, &text, &absent, e);
		if (rc)
			goto out;
		name = absent ? "" : strip(text.data);
		if (!*name)
			name = "default";
		from = path.data;
	}
	if (!name_valid(name)) {
		rc = err_set(e, CLOUD_EINVAL,
			     "%s names the gcloud configuration \"%s\", but "
			     "a name is a lower-case letter then letters, "
			     "digits or '-'; run `gcloud config "
			     "configurations activate NAME`", from, name);
		goto out;
	}
	buf_reset(&path);
	if (buf_appendf(&path, "%s/configurations/config_%s", base.data,
			name))
		goto nomem;
	buf_reset(&text);
	rc = read_small(path.data, &text, &absent, e);
	if (!rc && !absent)
		rc = parse(path.data, text.data, &w, e);
	if (rc)
		out[0] = '\0';
	goto out;
nomem:
	rc = err_set(e, CLOUD_ENOMEM, "out of memory");
out:
	buf_release(&base);
	buf_release(&path);
	buf_release(&text);
	return rc;
}

int gcloud_default(const char *flag, const char *section, const char *key,
		   char *buf, size_t len, const char **out, struct err *e)
{
	char var[128];
	const char *v;
	int rc;

	*out = NULL;
	if ((size_t)snprintf(var, sizeof(var), "CLOUDSDK_%s_%s", section,
			     key) >= sizeof(var))
		return err_set(e, CLOUD_EINVAL, "gcloud property [%s] %s: "
			       "name too long", section, key);
	for (char *p = var; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	v = flag && *flag ? flag : getenv(var);
	if (v && *v) {
		*out = v;
		return 0;
	}
	rc = gcloud_config_get(section, key, buf, len, e);
	if (!rc && *buf)
		*out = buf;
	return rc;
}
