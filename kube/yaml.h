/*
 * yaml.h (private to kube/): the subset of YAML that kubeconfigs are
 * written in, read into Jansson values: block mappings and sequences
 * (sequences may sit at their key's indent, as kubectl writes them),
 * plain, single- and double-quoted scalars, comments, one optional "---",
 * and flow collections that are JSON ("[]", "{}", ["a", "b"]). A document
 * that starts with "{" is read as JSON. Anything else (anchors, tags,
 * block scalars, multi-line plain scalars, complex keys, more than one
 * document) is refused with the line it is on, never guessed at.
 */
#ifndef SLICECTL_KUBE_YAML_H
#define SLICECTL_KUBE_YAML_H

#include "kube/kube.h"

/* *out is the document (an object, array or scalar). Errors are
 * KUBE_ECONFIG with "line N: what" (the caller names the file). */
int yaml_parse(const char *text, size_t len, json_t **out, struct err *e);

#endif
