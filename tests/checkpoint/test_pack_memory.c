/*
 * tests/checkpoint/test_pack_memory.c: pack_tree in bounded memory: a
 * sparse 2 GiB file, 64 threads, and a small tree that must not cost
 * zstd's workers' buffers. The helpers are pack_check.c's.
 */
#include "tests/checkpoint/pack_check.h"

#include "checkpoint/checkpoint.h"

#include "tests/harness/harness.h"

#include <criterion/criterion.h>

#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(pack, .init = setup_tmp, .fini = teardown_tmp, .timeout = 240);

/* AddressSanitizer's shadow memory and quarantine dwarf what the packer
 * uses, so the sanitized build checks everything but the peak. */
static void expect_peak_rss_below_256_mib(void)
{
	struct rusage ru;

	cr_assert_eq(getrusage(RUSAGE_SELF, &ru), 0);
#ifdef __SANITIZE_ADDRESS__
	cr_log_info("peak RSS %ld MiB, not checked under AddressSanitizer",
		    ru.ru_maxrss / 1024);
#else
	cr_expect_lt(ru.ru_maxrss / 1024, 256, "peak RSS %ld MiB",
		     ru.ru_maxrss / 1024);
#endif
}

Test(pack, sparse_2gib_file_streams_in_bounded_memory)
{
	char src[PATHLEN], file[PATHLEN], arc[PATHLEN];
	struct pack_stats st;
	int fd;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	path_join(file, src, "sparse.bin");
	fd = open(file, O_WRONLY | O_CREAT, 0644);
	cr_assert(fd >= 0);
	cr_assert_eq(pwrite(fd, "head", 4, 0), 4);
	cr_assert_eq(pwrite(fd, "middle", 6, 1ll << 30), 6);
	cr_assert_eq(ftruncate(fd, 2ll << 30), 0);
	close(fd);
	tmp_path(arc, "a.tar.zst");

	pack_ok(src, arc, 0, &st);
	cr_expect_eq(st.bytes_in, 2ull << 30);
	expect_peak_rss_below_256_mib();
	cr_expect_eq(sh("zstd -q -dc '%s' | tar -xOf - sparse.bin | "
			    "cmp -s - '%s'", arc, file), 0,
		     "sparse file content differs after unpack");
}

Test(pack, many_threads_stay_in_bounded_memory)
{
	char src[PATHLEN], file[PATHLEN];
	struct pack_stats st;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	path_join(file, src, "noise");
	write_random(file, 256u << 20, 13);
	pack_ok(src, NULL, 64, &st);
	cr_expect_eq(st.bytes_in, 256u << 20);
	expect_peak_rss_below_256_mib();
}

/* Live heap of the whole process: the main arena and every mmapped block
 * (zstd's workers' buffers are one or the other). */
static size_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

struct heap_sink {
	size_t base, peak;
};

static int heap_write(void *ud, const void *data, size_t len, struct err *e)
{
	struct heap_sink *h = ud;
	size_t now = heap_in_use();

	(void)data;
	(void)len;
	(void)e;
	if (now > h->base && now - h->base > h->peak)
		h->peak = now - h->base;
	return 0;
}

/* A step of a few KB must not cost zstd's workers' buffers (tens of MB,
 * each byte of them written over under MALLOC_PERTURB_), however many
 * threads are asked for. */
Test(pack, small_tree_allocates_about_its_size)
{
	struct pack_options o;
	struct heap_sink h;
	struct err e;
	char src[PATHLEN], file[PATHLEN];

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	write_text(src, "params", "w = [0.5, 0.25]\n", 0644);
	path_join(file, src, "opt.bin");
	write_random(file, 4000, 5);
	pack_options_init(&o);
	o.threads = 16;
	h.base = heap_in_use();
	h.peak = 0;
	cr_assert_eq(pack_tree(src, &o, heap_write, &h, NULL, &e), 0, "%s",
		     e.msg);
	cr_expect_lt(h.peak, (size_t)2 << 20,
		     "packing 4 KB held %zu KiB while writing", h.peak >> 10);
}
