/*
 * tests/unit/test_start_files.c: start_files_place(), which places a call's
 * files at every level (the boundary, the keeper, gVisor's helper, the
 * microvm guest's agent): what a well-formed buffer makes and with which
 * modes, and that a malformed buffer or a file that cannot be placed fails
 * with why and leaves nothing of the call behind.
 */
#include "sandbox/start_files.h"

#include "tap.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct buf {
    char data[8192];
    size_t len;
};

static void add(struct buf *b, const char *path, const char *text, unsigned mode)
{
    struct start_file_header fh = { .path_len = (uint32_t)strlen(path),
                                    .mode = mode,
                                    .len = strlen(text) };
    memcpy(b->data + b->len, &fh, sizeof fh);
    b->len += sizeof fh;
    memcpy(b->data + b->len, path, fh.path_len);
    b->len += fh.path_len;
    memcpy(b->data + b->len, text, fh.len);
    b->len += fh.len;
}

/* The entries of DIR (relative to the test's scratch directory), sorted and joined by ' '. */
static const char *entries(int root, const char *dir)
{
    static char out[512];
    out[0] = '\0';
    int fd = openat(root, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    char names[32][256];
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d)) && n < 32;)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    if (d)
        closedir(d);
    qsort(names, n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    for (size_t i = 0; i < n; i++)
        snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s", i ? " " : "", names[i]);
    return out;
}

static unsigned mode_of(int root, const char *path)
{
    struct stat st;
    return fstatat(root, path, &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_mode & 07777 : 0;
}

int main(void)
{
    char tmpl[] = "/tmp/test-start-files-XXXXXX";
    if (!mkdtemp(tmpl))
        return 1;
    int root = open(tmpl, O_PATH | O_DIRECTORY | O_CLOEXEC);
    char why[256];

    /* Placed, with the modes asked for whatever the umask. */
    umask(077);
    struct buf b = { .len = 0 };
    add(&b, "a.txt", "one\n", 0644);
    add(&b, "d/e/run.sh", "echo\n", 04755);
    add(&b, "d/plain", "no mode asked for\n", START_FILE_MODE_DEFAULT);
    ok(start_files_place(b.data, b.len, root, why, sizeof why) == 0, "two files placed");
    is_str(entries(root, "."), "a.txt d", "the workspace holds them");
    ok(mode_of(root, "a.txt") == 0644, "a.txt is 0644 under umask 077 (%o)",
       mode_of(root, "a.txt"));
    ok(mode_of(root, "d/e/run.sh") == 0755, "the setuid bit is dropped (%o)",
       mode_of(root, "d/e/run.sh"));
    ok(mode_of(root, "d/e") == 0700, "a directory made is mkdir -p's under umask 077 (%o)",
       mode_of(root, "d/e"));
    ok(mode_of(root, "d/plain") == 0600, "a file with no mode is 0666 less the umask (%o)",
       mode_of(root, "d/plain"));
    ok((umask(077) & 0777) == 077, "the umask is given back");

    /* A later file that cannot be placed: the call's earlier ones go too. */
    ok(symlinkat("/", root, "link") == 0, "a link planted");
    b.len = 0;
    add(&b, "new/x.txt", "x", 0644);
    add(&b, "d/e/y.txt", "y", 0644);
    add(&b, "link/etc/planted", "p", 0644);
    ok(start_files_place(b.data, b.len, root, why, sizeof why) == -1, "a link is not followed");
    ok(strstr(why, "cannot place file 'link/etc/planted' in the workspace") != NULL, "why: %s",
       why);
    is_str(entries(root, "."), "a.txt d link", "what the call made first is gone");
    is_str(entries(root, "d/e"), "run.sh", "the file it added to a directory already there too");
    is_str(entries(root, "d"), "e plain", "and only that");

    /* One that exists already is not replaced, and the rest of the call goes. */
    b.len = 0;
    add(&b, "b.txt", "b", 0644);
    add(&b, "a.txt", "replaced", 0644);
    ok(start_files_place(b.data, b.len, root, why, sizeof why) == -1, "an existing file");
    is_str(entries(root, "."), "a.txt d link", "b.txt taken back");

    /* Malformed: "..", and a record cut short after a whole one. */
    b.len = 0;
    add(&b, "c.txt", "c", 0644);
    add(&b, "../escape", "e", 0644);
    ok(start_files_place(b.data, b.len, root, why, sizeof why) == -1, "'..' refused");
    is_str(entries(root, "."), "a.txt d link", "c.txt taken back");
    b.len = 0;
    add(&b, "c.txt", "c", 0644);
    struct start_file_header fh = { .path_len = 3, .mode = 0644, .len = 100 };
    memcpy(b.data + b.len, &fh, sizeof fh);
    b.len += sizeof fh;
    ok(start_files_place(b.data, b.len, root, why, sizeof why) == -1, "a cut record refused");
    is_str(why, "the call's files are malformed", "why");
    is_str(entries(root, "."), "a.txt d link", "and nothing left of it");
    ok(start_files_place(b.data, sizeof fh - 1, root, why, sizeof why) == -1,
       "a header cut short refused");

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpl);
    if (system(cmd) != 0)
        return 1;
    return done_testing();
}
