/*
 * slurm_hostlist_each: a node list as slurmrestd says it ("n[1-2]"),
 * expanded without scontrol, in Slurm's order, zero padding kept.
 */
#include "launcher/target/slurm/slurm.h"

#include <criterion/criterion.h>
#include <string.h>

static int collect(void *ud, const char *host)
{
	struct buf *b = ud;

	return buf_appendf(b, "%s ", host);
}

static void expect(const char *list, int rc, const char *hosts)
{
	struct buf b;

	buf_init(&b);
	cr_expect_eq(slurm_hostlist_each(list, collect, &b), rc, "%s", list);
	if (!rc)
		cr_expect_str_eq(b.data ? b.data : "", hosts, "%s", list);
	buf_release(&b);
}

Test(slurm_hostlist, expands_ranges_lists_and_padding)
{
	expect("n1", 0, "n1 ");
	expect("n[1-2]", 0, "n1 n2 ");
	expect("gpu[08-10],login", 0, "gpu08 gpu09 gpu10 login ");
	expect("a[1,3-4],c[2]", 0, "a1 a3 a4 c2 ");
	expect("", 0, "");
}

Test(slurm_hostlist, refuses_what_is_not_a_hostlist)
{
	expect("n[x]", -1, NULL);
	expect("n[1-2", -1, NULL);
}
