/*
 * local_port.c: the rendezvous ports of a local run. Several local runs
 * share this machine (the test suite starts them side by side), and each
 * run's trainers cycle through RUN_RENDEZVOUS_PORTS ports from its base
 * (run/run.h): a base whose whole range is free now is written into
 * job.json.
 */
#include "launcher/target/local/local.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* Below Linux's ephemeral ports (32768 on), which outgoing connections
 * take at random. */
#define FIRST_BASE 29500u
#define END_PORT 32768u

/* Whether every port of [base, base + RUN_RENDEZVOUS_PORTS) binds on
 * 127.0.0.1 now. No SO_REUSEADDR: a port in TIME_WAIT counts as taken. */
static bool range_free(unsigned base)
{
	int fds[RUN_RENDEZVOUS_PORTS];
	unsigned n = 0;
	bool ok = true;

	while (ok && n < RUN_RENDEZVOUS_PORTS) {
		struct sockaddr_in a = { .sin_family = AF_INET };
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			return false;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a.sin_port = htons((uint16_t)(base + n));
		ok = !bind(fd, (struct sockaddr *)&a, sizeof(a));
		fds[n++] = fd;
	}
	while (n)
		close(fds[--n]);
	return ok;
}

int local_rendezvous_port(unsigned *out, struct err *e)
{
	unsigned slots = (END_PORT - FIRST_BASE) / RUN_RENDEZVOUS_PORTS;
	/* Two runs launched at once probe from different places. */
	unsigned first = (unsigned)getpid() % slots;

	for (unsigned i = 0; i < slots; i++) {
		unsigned base = FIRST_BASE +
				(first + i) % slots * RUN_RENDEZVOUS_PORTS;

		if (range_free(base)) {
			*out = base;
			return 0;
		}
	}
	return err_set(e, COMMON_EUSAGE,
		       "no %u free ports in a row on 127.0.0.1 between %u and "
		       "%u for the trainers' rendezvous: pass "
		       "--rendezvous-port N", RUN_RENDEZVOUS_PORTS, FIRST_BASE,
		       END_PORT - 1);
}
