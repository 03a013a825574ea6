/* strlist.c: a list of owned strings, for repeated options and positionals. */
#include "common.h"

#include <stdlib.h>
#include <string.h>

void strlist_init(struct strlist *l)
{
	l->v = NULL;
	l->n = 0;
	l->cap = 0;
}

void strlist_release(struct strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	strlist_init(l);
}

int strlist_push(struct strlist *l, const char *s)
{
	char *copy;

	if (l->n + 1 >= l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;
		char **v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return COMMON_ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	copy = strdup(s);
	if (!copy)
		return COMMON_ENOMEM;
	l->v[l->n++] = copy;
	l->v[l->n] = NULL;
	return 0;
}
