/*
 * tests/checkpoint/test_pack.c: pack_tree against the tools that unpack its
 * output on real hosts. Trees are built in a temporary directory, packed to
 * a file through a writer callback, unpacked with `zstd -dc | tar -xf -`
 * and compared with the source: contents, types, modes, symlink targets,
 * empty directories and odd names. Failures are in test_pack_errors.c,
 * memory in test_pack_memory.c; the helpers are pack_check.c's.
 */
#include "tests/checkpoint/pack_check.h"

#include "checkpoint/checkpoint.h"

#include "tests/harness/harness.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(pack, .init = setup_tmp, .fini = teardown_tmp, .timeout = 240);

Test(pack, odd_tree_round_trip)
{
	char src[PATHLEN], arc[PATHLEN], out[PATHLEN];
	struct tree_counts c;
	struct pack_stats st;
	char *tar_err;
	struct stat as;

	tmp_path(src, "src");
	tmp_path(arc, "src.tar.zst");
	tmp_path(out, "out");
	build_odd_tree(src, &c);

	pack_ok(src, arc, 2, &st);
	tar_err = unpack(arc, out);
	cr_expect_str_empty(tar_err, "tar complained: %s", tar_err);
	free(tar_err);
	compare_trees(src, out);

	cr_expect_eq(st.files, c.files, "files %llu",
		     (unsigned long long)st.files);
	cr_expect_eq(st.dirs, c.dirs, "dirs %llu",
		     (unsigned long long)st.dirs);
	cr_expect_eq(st.symlinks, c.symlinks, "symlinks %llu",
		     (unsigned long long)st.symlinks);
	/* The hard link's bytes are read and stored once. */
	cr_expect_eq(st.bytes_in, c.bytes, "bytes_in %llu",
		     (unsigned long long)st.bytes_in);
	cr_assert_eq(stat(arc, &as), 0);
	cr_expect_eq((uint64_t)as.st_size, st.bytes_out);
}

Test(pack, names_are_relative_and_hard_links_kept)
{
	char src[PATHLEN], arc[PATHLEN], out[PATHLEN], a[PATHLEN], b[PATHLEN];
	struct tree_counts c;
	struct stat sa, sb;

	tmp_path(src, "src");
	tmp_path(arc, "src.tar.zst");
	tmp_path(out, "out");
	build_odd_tree(src, &c);
	pack_ok(src, arc, 1, NULL);
	cr_assert_eq(sh("zstd -q -dc '%s' | tar -tf - | "
			    "grep -q -e '^/' -e '^\\./' -e '^src'", arc), 1,
		     "an entry is not relative to the source");
	free(unpack(arc, out));
	path_join(a, out, "plain.txt");
	path_join(b, out, "sub/hard");
	cr_assert_eq(stat(a, &sa), 0);
	cr_assert_eq(stat(b, &sb), 0);
	cr_expect_eq(sa.st_ino, sb.st_ino, "hard link unpacked as a copy");
}

Test(pack, source_forms)
{
	char src[PATHLEN], slash[PATHLEN + 1], link[PATHLEN], arc[PATHLEN];
	char out[PATHLEN];

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	write_text(src, "a", "a\n", 0644);
	make_dir(src, "d", 0755);

	snprintf(slash, sizeof(slash), "%s/", src);
	tmp_path(arc, "slash.tar.zst");
	tmp_path(out, "out-slash");
	pack_ok(slash, arc, 1, NULL);
	free(unpack(arc, out));
	compare_trees(src, out);

	/* A symlink given as the source is what the user meant. */
	tmp_path(link, "link");
	cr_assert_eq(symlink("src", link), 0);
	tmp_path(arc, "link.tar.zst");
	tmp_path(out, "out-link");
	pack_ok(link, arc, 1, NULL);
	free(unpack(arc, out));
	compare_trees(src, out);
}

Test(pack, single_file_is_stored_under_its_base_name)
{
	char dir[PATHLEN], file[PATHLEN], arc[PATHLEN], out[PATHLEN];
	char got[PATHLEN];
	struct pack_stats st;
	struct stat s;
	DIR *d;
	struct dirent *de;
	int n = 0;

	tmp_path(dir, "in");
	cr_assert_eq(mkdir(dir, 0755), 0);
	path_join(file, dir, "model weights.bin");
	write_random(file, 100000, 3);
	cr_assert_eq(chmod(file, 0751), 0);
	tmp_path(arc, "one.tar.zst");
	tmp_path(out, "out");

	pack_ok(file, arc, 2, &st);
	cr_expect_eq(st.files, 1);
	cr_expect_eq(st.dirs, 0);
	cr_expect_eq(st.bytes_in, 100000);
	free(unpack(arc, out));
	d = opendir(out);
	cr_assert(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	cr_expect_eq(n, 1, "expected one entry, got %d", n);
	path_join(got, out, "model weights.bin");
	cr_assert_eq(stat(got, &s), 0, "not unpacked under its base name");
	cr_expect_eq(s.st_mode & 07777, 0751);
	cr_expect(same_bytes(file, got));
}

Test(pack, non_utf8_name_survives)
{
	char src[PATHLEN], arc[PATHLEN], out[PATHLEN];

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	write_text(src, "latin1-caf\xe9", "bytes\n", 0644);
	tmp_path(arc, "a.tar.zst");
	tmp_path(out, "out");
	pack_ok(src, arc, 1, NULL);
	/* tar may warn about the raw-bytes header; the name must survive. */
	free(unpack(arc, out));
	compare_trees(src, out);
}

Test(pack, content_checksum_catches_a_flipped_byte)
{
	char src[PATHLEN], file[PATHLEN], arc[PATHLEN];
	unsigned char hdr[5], byte;
	struct stat s;
	int fd;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	path_join(file, src, "noise");
	write_random(file, 1 << 20, 11);
	tmp_path(arc, "a.tar.zst");
	pack_ok(src, arc, 1, NULL);
	cr_assert_eq(sh("zstd -q -t '%s'", arc), 0);

	fd = open(arc, O_RDWR);
	cr_assert(fd >= 0);
	cr_assert_eq(pread(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	cr_expect_eq(hdr[0] | hdr[1] << 8 | hdr[2] << 16 |
		     (uint32_t)hdr[3] << 24, 0xFD2FB528u, "not a zstd frame");
	cr_expect(hdr[4] & 0x04, "frame header has no content checksum");
	cr_assert_eq(fstat(fd, &s), 0);
	/* Mid-file is inside a raw block of the random file's bytes. */
	cr_assert_eq(pread(fd, &byte, 1, s.st_size / 2), 1);
	byte ^= 0x10;
	cr_assert_eq(pwrite(fd, &byte, 1, s.st_size / 2), 1);
	close(fd);
	cr_expect_neq(sh("zstd -q -t '%s' 2>/dev/null", arc), 0,
		      "zstd -t accepted a corrupted stream");
}

Test(pack, threads_do_not_change_the_tree)
{
	char src[PATHLEN], a1[PATHLEN], a2[PATHLEN], o1[PATHLEN];
	char o2[PATHLEN];
	struct tree_counts c;

	tmp_path(src, "src");
	tmp_path(a1, "t1.tar.zst");
	tmp_path(a2, "t2.tar.zst");
	tmp_path(o1, "o1");
	tmp_path(o2, "o2");
	build_odd_tree(src, &c);
	pack_ok(src, a1, 1, NULL);
	pack_ok(src, a2, 2, NULL);
	free(unpack(a1, o1));
	free(unpack(a2, o2));
	compare_trees(src, o1);
	compare_trees(src, o2);
	/* Same walk, same headers: the tar streams are identical. */
	cr_expect_eq(sh("zstd -q -dc '%s' > '%s.tar' && "
			    "zstd -q -dc '%s' > '%s.tar' && "
			    "cmp -s '%s.tar' '%s.tar'", a1, a1, a2, a2, a1,
			    a2), 0, "tar streams differ between thread counts");
}

/* Tar streams that end just within the bytes held before compression
 * starts, and just beyond them, round-trip alike. */
Test(pack, streams_either_side_of_the_held_start)
{
	static const size_t sizes[] = { (1u << 20) - 12 * 1024, 1u << 20,
					3u << 20 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char src[PATHLEN], arc[PATHLEN], out[PATHLEN], file[PATHLEN];
		char name[32];
		struct pack_stats st;

		snprintf(name, sizeof(name), "src%zu", i);
		tmp_path(src, name);
		cr_assert_eq(mkdir(src, 0755), 0);
		path_join(file, src, "blob");
		write_random(file, sizes[i], 11 + i);
		snprintf(name, sizeof(name), "a%zu.tar.zst", i);
		tmp_path(arc, name);
		snprintf(name, sizeof(name), "out%zu", i);
		tmp_path(out, name);
		pack_ok(src, arc, 2, &st);
		free(unpack(arc, out));
		compare_trees(src, out);
	}
}
