/*
 * agent.h (private to ssh/): a minimal ssh-agent client (draft-miller-ssh-
 * agent): one connection, identities listed once, and a sign request per
 * host authentication. The agent socket is local, so calls block briefly
 * (an agent that does not answer within AGENT_TIMEOUT_S is given up on).
 */
#ifndef SLICECTL_SSH_AGENT_H
#define SLICECTL_SSH_AGENT_H

#include "common/common.h"
#include "ssh/key.h"

#include <stddef.h>
#include <stdint.h>

/* Sign request flags: the hash an RSA key signs with. */
#define AGENT_RSA_SHA2_256 2u
#define AGENT_RSA_SHA2_512 4u

#define AGENT_TIMEOUT_S 30

/* Every key points back at its agent: the struct must not move while its
 * keys are in use. */
struct agent {
	int fd;               /* -1 when closed, or lost after an I/O error */
	struct ssh_key *keys; /* each with agent set to this agent */
	size_t nkeys;
	char *path;           /* the socket, for messages */
};

/* Connects to the socket (usually $SSH_AUTH_SOCK) and lists identities of
 * the types key.h knows; others are skipped, so nkeys may be 0. On failure
 * a is left closed (fd -1, nothing held); agent_close is safe either way. */
int agent_open(struct agent *a, const char *socket_path, struct err *e);
void agent_close(struct agent *a);

/* Asks the agent to sign data with the key whose blob is pub. The agent's
 * reply is unwrapped: *sig is the raw signature without the algorithm
 * string, allocated with malloc. flags are AGENT_RSA_SHA2_256 (2) or _512
 * (4) for RSA, else 0; a reply signed with another algorithm than the one
 * asked for is refused. */
int agent_sign(struct agent *a, const unsigned char *pub, size_t pub_len,
	       const unsigned char *data, size_t len, uint32_t flags,
	       unsigned char **sig, size_t *sig_len, struct err *e);

#endif
