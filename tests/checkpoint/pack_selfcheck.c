/*
 * tests/checkpoint/pack_selfcheck.c: a by-hand throughput check of
 * pack_tree against `tar -cf - DIR | zstd -3 -T0`, not a test (timing
 * depends on the machine). Build with
 * `ninja -C BUILD tests/checkpoint/pack_selfcheck` and run it with no
 * argument to pack a generated tree (1 GiB of bf16-like tensors, which
 * compress about 1.3x, plus 10,000 small files), or with a directory to
 * pack that instead. Prints the best of five rounds of each, with the CPU
 * time they took and the load average (on a busy machine the wall times
 * mean little), and exits 1 when pack_tree's best is slower than 0.9x the
 * pipeline's or its peak RSS reaches 256 MiB.
 */
#include "checkpoint/checkpoint.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 5
#define TENSORS 16
#define TENSOR_MIB 64
#define SMALL_FILES 10000

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int write_file(const char *path, const unsigned char *p, size_t len)
{
	FILE *f = fopen(path, "wb");
	int r = f && fwrite(p, 1, len, f) == len ? 0 : -1;

	if (f && fclose(f) != 0)
		r = -1;
	if (r)
		fprintf(stderr, "writing %s: %s\n", path, strerror(errno));
	return r;
}

/* bf16 values of similar magnitude: random mantissa bytes, and sign and
 * exponent bytes from a few values, as trained weights look. */
static int generate(const char *dir)
{
	static unsigned char block[1 << 20];
	char path[4096];

	snprintf(path, sizeof(path), "%s/tensors", dir);
	if (mkdir(path, 0755) != 0)
		return -1;
	for (int t = 0; t < TENSORS; t++) {
		FILE *f;

		snprintf(path, sizeof(path), "%s/tensors/shard-%02d.bin", dir,
			 t);
		f = fopen(path, "wb");
		for (int m = 0; f && m < TENSOR_MIB; m++) {
			for (size_t i = 0; i < sizeof(block); i += 2) {
				uint64_t r = next_rand();

				block[i] = (unsigned char)r;
				block[i + 1] = (unsigned char)(0x3a +
							       (r >> 8) % 7);
			}
			if (fwrite(block, 1, sizeof(block), f) != sizeof(block))
				break;
		}
		if (!f || ferror(f) || fclose(f) != 0) {
			fprintf(stderr, "writing %s failed\n", path);
			return -1;
		}
	}
	for (int i = 0; i < SMALL_FILES; i++) {
		static const char chars[] = "abcdefghij ,.=\n";
		size_t n = 200 + next_rand() % 4000;

		if (i % 100 == 0) {
			snprintf(path, sizeof(path), "%s/d%03d", dir, i / 100);
			if (mkdir(path, 0755) != 0)
				return -1;
		}
		for (size_t k = 0; k < n; k++)
			block[k] = (unsigned char)
				chars[next_rand() % (sizeof(chars) - 1)];
		snprintf(path, sizeof(path), "%s/d%03d/f%05d.txt", dir,
			 i / 100, i);
		if (write_file(path, block, n))
			return -1;
	}
	return 0;
}

static int discard(void *ud, const void *data, size_t len, struct err *e)
{
	(void)data;
	(void)e;
	*(uint64_t *)ud += len;
	return 0;
}

/* CPU seconds (user and system) of who, so far. */
static double cpu_seconds(int who)
{
	struct rusage ru;

	getrusage(who, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Wall seconds, or -1; *cpu gets the CPU seconds spent. */
static double time_pipeline(const char *cmd, double *cpu)
{
	uint64_t t0 = mono_us();
	double c0 = cpu_seconds(RUSAGE_CHILDREN);
	int st = system(cmd);

	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "failed: %s\n", cmd);
		return -1;
	}
	*cpu = cpu_seconds(RUSAGE_CHILDREN) - c0;
	return (double)(mono_us() - t0) / 1e6;
}

static double time_pack(const char *dir, uint64_t *out, uint64_t *in,
			double *cpu)
{
	struct pack_options o;
	struct pack_stats st;
	struct err e;
	uint64_t t0 = mono_us();
	double c0 = cpu_seconds(RUSAGE_SELF);

	pack_options_init(&o);
	*out = 0;
	if (pack_tree(dir, &o, discard, out, &st, &e)) {
		fprintf(stderr, "pack_tree: %s\n", e.msg);
		return -1;
	}
	*in = st.bytes_in;
	*cpu = cpu_seconds(RUSAGE_SELF) - c0;
	return (double)(mono_us() - t0) / 1e6;
}

int main(int argc, char **argv)
{
	char tmp[4096] = "";
	const char *dir = argc > 1 ? argv[1] : NULL;
	struct buf cmd, q;
	double best_tar = 1e30, best_pack = 1e30, cpu_tar = 0, cpu_pack = 0;
	uint64_t out = 0, in = 0;
	struct rusage ru;
	double load[3];
	int rc = 0;

	log_setup("pack_selfcheck", LOG_INFO);
	buf_init(&cmd);
	buf_init(&q);
	if (!dir) {
		const char *base = getenv("TMPDIR");

		snprintf(tmp, sizeof(tmp), "%s/slicectl-selfcheck-XXXXXX",
			 base && *base ? base : "/tmp");
		if (!mkdtemp(tmp)) {
			perror("mkdtemp");
			return 1;
		}
		printf("generating %d MiB of tensors and %d small files in "
		       "%s\n", TENSORS * TENSOR_MIB, SMALL_FILES, tmp);
		if (generate(tmp)) {
			fprintf(stderr, "generating the tree failed\n");
			rc = 1;
			goto out;
		}
		dir = tmp;
	}
	if (shq_append(&q, dir) ||
	    buf_appendf(&cmd, "tar -cf - -C %s . | zstd -q -3 -T0 > /dev/null",
			q.data)) {
		rc = 1;
		goto out;
	}
	/* One unmeasured pass so both read from the page cache. */
	if (time_pipeline(cmd.data, &cpu_tar) < 0) {
		rc = 1;
		goto out;
	}
	for (int i = 0; i < ROUNDS; i++) {
		double ct, cp;
		double t = time_pipeline(cmd.data, &ct);
		double p = time_pack(dir, &out, &in, &cp);

		if (t < 0 || p < 0) {
			rc = 1;
			goto out;
		}
		if (getloadavg(load, 1) != 1)
			load[0] = -1;
		printf("round %d: tar | zstd -3 -T0 %.2f s (%.2f s CPU), "
		       "pack_tree %.2f s (%.2f s CPU), load %.1f\n",
		       i + 1, t, ct, p, cp, load[0]);
		if (t < best_tar) {
			best_tar = t;
			cpu_tar = ct;
		}
		if (p < best_pack) {
			best_pack = p;
			cpu_pack = cp;
		}
	}
	getrusage(RUSAGE_SELF, &ru);
	printf("best: tar | zstd %.2f s (%.2f s CPU), pack_tree %.2f s "
	       "(%.2f s CPU, %.0f MB/s in, ratio %.3f)\n", best_tar, cpu_tar,
	       best_pack, cpu_pack, (double)in / best_pack / 1e6,
	       out ? (double)in / (double)out : 0.0);
	printf("pack_tree throughput = %.2fx the pipeline (target >= 0.9); "
	       "peak RSS %ld MiB (target < 256)\n", best_tar / best_pack,
	       ru.ru_maxrss / 1024);
	if (best_tar / best_pack < 0.9 || ru.ru_maxrss / 1024 >= 256)
		rc = 1;
out:
	if (tmp[0]) {
		buf_reset(&q);
		buf_reset(&cmd);
		if (!shq_append(&q, tmp) &&
		    !buf_appendf(&cmd, "rm -rf %s", q.data) &&
		    system(cmd.data) != 0)
			fprintf(stderr, "could not remove %s\n", tmp);
	}
	buf_release(&cmd);
	buf_release(&q);
	return rc;
}
