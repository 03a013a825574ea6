/*
 * yaml.h (private to kube/): a kubeconfig's YAML, read with libyaml into
 * Jansson values as kubectl reads it: block and flow style, every scalar
 * style, tags, anchors, aliases and merge keys ("<<"), plain scalars typed
 * as YAML 1.1 types them ("yes" is true, 0x1f is 31, "0123" quoted is a
 * string). Only the first document counts, as in kubectl. A key written
 * twice, a mapping or list as a key, nesting deeper than 64 and aliases
 * that expand the document by more than 100000 values or 4 MiB are
 * refused.
 */
#ifndef SLICECTL_KUBE_YAML_H
#define SLICECTL_KUBE_YAML_H

#include "kube/kube.h"

/* *out is the document (an object, array or scalar); an alias shares its
 * anchor's value, so the tree is read-only. Errors are KUBE_ECONFIG with
 * "line N: what (column C)" (the caller names the file). */
int yaml_parse(const char *text, size_t len, json_t **out, struct err *e);

#endif
