/*
 * tests/unit/test_landlock.c: the Landlock plan and its enforcement. The
 * plan tables are pure; the enforcement cases fork a child that applies a
 * plan and exits with the errno of what it tried (0 for success).
 */
#include "tap.h"

#include "common/landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/compat.h"

struct abi_case {
    int abi;
    uint64_t handled_fs;
    uint64_t scoped;
};

static const struct abi_case abi_cases[] = {
    { 0, 0, 0 },      { 1, 0x1fff, 0 }, { 2, 0x3fff, 0 }, { 3, 0x7fff, 0 },
    { 4, 0x7fff, 0 }, { 5, 0xffff, 0 }, { 6, 0xffff, 3 }, { 7, 0xffff, 3 },
};

static void test_init(void)
{
    for (size_t i = 0; i < sizeof abi_cases / sizeof abi_cases[0]; i++) {
        const struct abi_case *c = &abi_cases[i];
        struct landlock_plan plan;
        landlock_plan_init(&plan, c->abi);
        ok(plan.abi == c->abi && plan.handled_fs == c->handled_fs && plan.scoped == c->scoped,
           "abi %d handles fs 0x%llx, scopes 0x%llx", c->abi, (unsigned long long)plan.handled_fs,
           (unsigned long long)plan.scoped);
    }
}

static void test_add(void)
{
    static struct landlock_plan plan;
    struct cordon_err err = { 0 };
    landlock_plan_init(&plan, 1);
    char longpath[600];
    memset(longpath, 'a', sizeof longpath - 1);
    longpath[0] = '/';
    longpath[sizeof longpath - 1] = '\0';
    int rc = landlock_plan_add(&plan, longpath, LANDLOCK_RO, false, &err);
    is_str(rc < 0 ? err.msg : NULL,
           "cannot plan landlock access to "
           "'/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...': path too long",
           "a path longer than the plan holds is refused");
    ok(plan.n_rules == 0, "and not added");
    for (int i = 0; i < LANDLOCK_PLAN_MAX_RULES; i++)
        landlock_plan_add(&plan, "/usr", LANDLOCK_RO, false, &err);
    rc = landlock_plan_add(&plan, "/etc", LANDLOCK_RO, false, &err);
    is_str(rc < 0 ? err.msg : NULL, "cannot plan landlock access to '/etc': more than 256 paths",
           "a full plan is refused");
    ok(err.kind == CORDON_E_SETUP, "as a setup error");
}

static char scratch[] = "/tmp/cordon-landlock-XXXXXX";
static char abstract_name[64];

static int try_read(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    close(fd);
    return 0;
}

static int try_write_scratch(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/file", scratch);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return errno;
    int rc = write(fd, "x", 1) == 1 ? 0 : errno;
    close(fd);
    return rc;
}

static int try_signal_parent(void)
{
    return kill(getppid(), 0) < 0 ? errno : 0;
}

static int try_abstract_connect(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t len = strlen(abstract_name + 1) + 1;
    memcpy(sa.sun_path, abstract_name, len);
    socklen_t sa_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    int rc = connect(fd, (struct sockaddr *)&sa, sa_len);
    return rc < 0 ? errno : 0;
}

static int try_read_hostname(void)
{
    return try_read("/etc/hostname");
}
static int try_read_passwd(void)
{
    return try_read("/etc/passwd");
}
static int try_read_usr(void)
{
    return try_read("/usr/bin/env");
}
static int try_write_usr(void)
{
    int fd = open("/usr/cordon-landlock-probe", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) {
        close(fd);
        unlink("/usr/cordon-landlock-probe");
        return 0;
    }
    return errno;
}

/* A child that applied PLAN and then ran FN; its exit status, or 256 + signal. */
static int in_child(const struct landlock_plan *plan, int (*fn)(void), char *msg, size_t msg_len)
{
    int p[2];
    if (pipe(p) < 0)
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        struct cordon_err err = { 0 };
        if (landlock_plan_apply(plan, &err) < 0) {
            ssize_t unused = write(p[1], err.msg, strlen(err.msg));
            (void)unused;
            _exit(252);
        }
        _exit(fn());
    }
    close(p[1]);
    ssize_t got = read(p[0], msg, msg_len - 1);
    msg[got > 0 ? got : 0] = '\0';
    close(p[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 256 + WTERMSIG(st);
}

struct enforce_case {
    const char *name;
    int (*fn)(void);
    int want; /* errno, or 0 */
    int min_abi;
};

static const struct enforce_case enforce_cases[] = {
    { "reading /usr works", try_read_usr, 0, 1 },
    { "writing under /usr is EACCES", try_write_usr, EACCES, 1 },
    { "reading /etc/hostname is EACCES", try_read_hostname, EACCES, 1 },
    { "reading /etc/passwd, a file rule, works", try_read_passwd, 0, 1 },
    { "writing in the scratch dir works", try_write_scratch, 0, 1 },
    { "signalling the parent is EPERM", try_signal_parent, EPERM, 6 },
    { "connecting to the parent's abstract socket is EPERM", try_abstract_connect, EPERM, 6 },
};

static void test_enforce(void)
{
    int abi = landlock_abi();
    if (abi <= 0) {
        printf("ok %d - enforcement # SKIP the kernel has no Landlock\n", ++tap_n);
        return;
    }
    if (!mkdtemp(scratch)) {
        ok(0, "mkdtemp: %s", strerror(errno));
        return;
    }
    snprintf(abstract_name, sizeof abstract_name, "%ccordon-landlock-%d", '\0', getpid());
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t len = strlen(abstract_name + 1) + 1;
    memcpy(sa.sun_path, abstract_name, len);
    ok(lfd >= 0 &&
           bind(lfd, (struct sockaddr *)&sa,
                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) == 0 &&
           listen(lfd, 4) == 0,
       "the parent listens on an abstract socket");

    static struct landlock_plan plan;
    struct cordon_err err = { 0 };
    landlock_plan_init(&plan, abi);
    ok(landlock_plan_add(&plan, "/usr", LANDLOCK_RO, false, &err) == 0 &&
           landlock_plan_add(&plan, "/etc/passwd", LANDLOCK_RW, false, &err) == 0 &&
           landlock_plan_add(&plan, "/nonexistent/optional", LANDLOCK_RO, true, &err) == 0 &&
           landlock_plan_add(&plan, scratch, LANDLOCK_RW, false, &err) == 0,
       "plan: /usr ro, /etc/passwd (a file) rw, a missing optional path, scratch rw");

    char msg[256];
    int got;
    for (size_t i = 0; i < sizeof enforce_cases / sizeof enforce_cases[0]; i++) {
        const struct enforce_case *c = &enforce_cases[i];
        if (abi < c->min_abi) {
            printf("ok %d - %s # SKIP needs landlock abi %d, have %d\n", ++tap_n, c->name,
                   c->min_abi, abi);
            continue;
        }
        got = in_child(&plan, c->fn, msg, sizeof msg);
        if (!ok(got == c->want, "%s", c->name))
            printf("#   got %d (%s) %s\n", got, got < 256 ? strerror(got) : "signal", msg);
    }
    /* Each older ABI's shorter ruleset attribute must still be accepted. */
    for (int a = 1; a <= abi && a <= 7; a++) {
        struct landlock_plan older;
        landlock_plan_init(&older, a);
        landlock_plan_add(&older, "/usr", LANDLOCK_RO, false, &err);
        got = in_child(&older, try_read_hostname, msg, sizeof msg);
        if (!ok(got == EACCES, "abi %d plan applies and confines", a))
            printf("#   got %d %s\n", got, msg);
    }

    struct landlock_plan missing;
    landlock_plan_init(&missing, abi);
    landlock_plan_add(&missing, "/nonexistent/required", LANDLOCK_RO, false, &err);
    got = in_child(&missing, try_read_usr, msg, sizeof msg);
    ok(got == 252, "a missing required path fails the apply");
    is_str(msg, "landlock: cannot open '/nonexistent/required': No such file or directory",
           "missing required path: message");

    struct landlock_plan none;
    landlock_plan_init(&none, 0);
    got = in_child(&none, try_read_hostname, msg, sizeof msg);
    ok(got == 0, "abi 0 applies nothing");

    close(lfd);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", scratch);
}

int main(void)
{
    test_init();
    test_add();
    test_enforce();
    return done_testing();
}
