/*
 * tests/unit/test_procfs.c: the one reader of small files (read_small_fd,
 * read_small_at, read_small_file) and /proc/PID/stat through it: a cut at
 * the buffer, a directory, a missing file, a command name that holds ") ",
 * and a process that has gone reading as gone.
 */
#include "common/hostpath.h"
#include "common/procfs.h"

#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void put(int dir, const char *name, const char *text)
{
    int fd = openat(dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        ok(0, "cannot write %s", name);
    if (fd >= 0)
        close(fd);
}

static void test_read_small_at(int dir)
{
    char buf[8];
    put(dir, "seven", "1234567");
    put(dir, "ten", "0123456789");
    ok(read_small_at(dir, "seven", buf, sizeof buf) == 7 && !strcmp(buf, "1234567"),
       "a file that fits is read whole, beneath a directory descriptor");
    ok(read_small_at(dir, "ten", buf, sizeof buf) == 7 && !strcmp(buf, "0123456"),
       "a longer one is cut at the buffer, NUL-terminated");
    memset(buf, 'x', sizeof buf);
    errno = 0;
    ok(read_small_at(dir, "absent", buf, sizeof buf) == -1 && errno == ENOENT && !buf[0],
       "a missing file: -1, ENOENT, and an empty buffer");
    mkdirat(dir, "sub", 0700);
    memset(buf, 'x', sizeof buf);
    errno = 0;
    ok(read_small_at(dir, "sub", buf, sizeof buf) == -1 && errno == EISDIR && !buf[0],
       "a directory: -1, EISDIR, and an empty buffer");
    int fds[2];
    if (pipe(fds) == 0) {
        (void)!write(fds[1], "ab", 2);
        (void)!write(fds[1], "cd", 2);
        close(fds[1]);
        ok(read_small_fd(fds[0], buf, sizeof buf) == 4 && !strcmp(buf, "abcd"),
           "read_small_fd reads to the end of a pipe, across writes");
        close(fds[0]);
    }
}

static void test_read_small_file(const char *tmp, int dir)
{
    char path[256];
    size_t n = 0;
    struct cordon_err err = { 0 };
    snprintf(path, sizeof path, "%s/ten", tmp);
    char *text = read_small_file(path, 10, &n, &err);
    ok(text && n == 10 && !strcmp(text, "0123456789"), "read_small_file: exactly MAX bytes");
    free(text);
    text = read_small_file(path, 9, &n, &err);
    ok(!text && strstr(err.msg, "larger than 9 bytes"), "one byte over MAX is refused: %s",
       err.msg);
    snprintf(path, sizeof path, "%s/sub", tmp);
    text = read_small_file(path, 10, &n, &err);
    ok(!text && strstr(err.msg, "it is a directory"), "a directory is refused: %s", err.msg);
    snprintf(path, sizeof path, "%s/absent", tmp);
    text = read_small_file(path, 10, &n, &err);
    ok(!text && err.errnum == ENOENT, "a missing file: errnum ENOENT (%s)", err.msg);
    put(dir, "empty", "");
    snprintf(path, sizeof path, "%s/empty", tmp);
    text = read_small_file(path, 10, &n, &err);
    ok(text && n == 0 && !text[0], "an empty file reads as \"\"");
    free(text);
}

static void test_proc_stat(void)
{
    char buf[1024];
    unsigned long long v = 0;
    /* The command name may hold anything: only the last ')' ends it. */
    prctl(PR_SET_NAME, "a) S 1 (b", 0, 0, 0);
    const char *stat = proc_stat_self(buf, sizeof buf);
    ok(stat && stat[0] == 'R', "proc_stat_self: past a name with ') ' in it, the state is R");
    ok(stat && proc_stat_field(stat, 4, &v) && v == (unsigned long long)getppid(),
       "field 4 is the parent (%llu)", v);
    ok(stat && proc_stat_field(stat, 22, &v) && v > 0, "field 22, the start time, is a number");
    ok(stat && !proc_stat_field(stat, 99, &v), "no field 99");
    ok(stat && !proc_stat_field(stat, 3, &v), "the state is no number");
    stat = proc_stat(getpid(), buf, sizeof buf);
    ok(stat && proc_stat_field(stat, 4, &v) && v == (unsigned long long)getppid(),
       "proc_stat(getpid()) reads the same process");
    ok(!proc_stat(getpid(), buf, 8), "a buffer too small for the name: NULL, not a misreading");
    ok(!proc_stat(0, buf, sizeof buf) && !proc_stat(-1, buf, sizeof buf),
       "pid 0 or -1 (from a file) reads as gone, never as the caller");

    pid_t child = fork();
    if (child == 0)
        _exit(0);
    siginfo_t si;
    waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT);
    stat = proc_stat(child, buf, sizeof buf);
    ok(stat && stat[0] == 'Z', "an exited child not yet reaped reads as a zombie");
    waitpid(child, NULL, 0);
    ok(!proc_stat(child, buf, sizeof buf), "a reaped child reads as gone (NULL)");
}

int main(void)
{
    char tmp[] = "/tmp/cordon-procfs-XXXXXX";
    if (!mkdtemp(tmp)) {
        ok(0, "mkdtemp");
        return done_testing();
    }
    int dir = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    test_read_small_at(dir);
    test_read_small_file(tmp, dir);
    test_proc_stat();
    hostpath_remove_tree(tmp);
    close(dir);
    return done_testing();
}
