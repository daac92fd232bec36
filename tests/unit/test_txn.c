/*
 * tests/unit/test_txn.c: a transactional workspace's scan and commit on
 * layers built by hand in a temporary directory (no overlayfs, no
 * privileges): what each change counts as, what refuses the whole commit,
 * and that applying never follows a link the host tree holds. Whiteouts
 * (char 0/0 nodes) need CAP_MKNOD; the integration tests cover them.
 */
#include "tap.h"

#include "common/cleanup.h"
#include "policy/policy.h"
#include "sandbox/txn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * A tree, one entry a string: "f:path=content", "d:path", "l:path=target",
 * "p:path" (a FIFO). Parents come first.
 */
struct txn_case {
    const char *name;
    const char *upper[6];
    const char *host[6];
    enum txn_outcome outcome;
    unsigned added, changed, removed;
    const char *reason;       /* a part of the refusal, or NULL */
    const char *after[4];     /* on the host afterwards: "f:path=content", "d:path", "-:path" */
};

static const struct txn_case cases[] = {
    { "new file and directory", { "f:a.txt=x", "d:d", "f:d/f=yz" }, { 0 },
      TXN_COMMITTED, 3, 0, 0, NULL, { "f:a.txt=x", "f:d/f=yz" } },
    { "changed file", { "f:a.txt=new" }, { "f:a.txt=old" },
      TXN_COMMITTED, 0, 1, 0, NULL, { "f:a.txt=new" } },
    { "copied up but unchanged", { "f:a.txt=same" }, { "f:a.txt=same" },
      TXN_COMMITTED, 0, 0, 0, NULL, { "f:a.txt=same" } },
    { "a FIFO", { "f:a.txt=x", "p:fifo" }, { 0 },
      TXN_REFUSED, 1, 0, 0, "'fifo' is a device, FIFO or socket", { "-:a.txt" } },
    { "a protected name at the top", { "f:a.txt=x", "f:.env=K=v" }, { 0 },
      TXN_REFUSED, 2, 0, 0, "'.env' is protected", { "-:a.txt", "-:.env" } },
    { "a protected name deep down", { "d:v", "d:v/w", "d:v/w/.git", "f:v/w/.git/config=x" }, { 0 },
      TXN_REFUSED, 4, 0, 0, "'v/w/.git' is protected", { "-:v" } },
    { "a link leading out", { "f:a.txt=x", "l:out=/etc/passwd" }, { 0 },
      TXN_REFUSED, 2, 0, 0, "'out' is a link leading out", { "-:a.txt" } },
    { "a link climbing out", { "d:d", "l:d/up=../../x" }, { 0 },
      TXN_REFUSED, 2, 0, 0, "'d/up' is a link leading out", { "-:d" } },
    { "a link staying in", { "d:d", "l:d/ok=../a.txt" }, { "f:a.txt=x" },
      TXN_COMMITTED, 2, 0, 0, NULL, { "f:d/ok=x" } },
    /* The host's "sub" is a link out (planted earlier): the layer's directory
     * replaces it, and nothing is written where it pointed. */
    { "a host link under a new directory", { "d:sub", "f:sub/f=pwned" },
      { "d:../outside", "l:sub=../outside" },
      TXN_COMMITTED, 1, 1, 0, NULL, { "d:sub", "f:sub/f=pwned", "-:../outside/f" } },
    { "a host directory replaced by a file", { "f:d=file" }, { "d:d", "f:d/x=x" },
      TXN_COMMITTED, 0, 1, 0, NULL, { "f:d=file" } },
    /* Replacing a directory removes what is in it: a protected name there refuses. */
    { "a protected name under a replaced directory", { "f:d=file" },
      { "d:d", "d:d/.git", "f:d/.git/HEAD=ref" },
      TXN_REFUSED, 0, 1, 0, "'d/.git' is protected", { "f:d/.git/HEAD=ref" } },
};

static int make(const char *root, const char *spec)
{
    char path[512], kind = spec[0];
    const char *rest = spec + 2, *eq = strchr(rest, '=');
    size_t n = eq ? (size_t)(eq - rest) : strlen(rest);
    snprintf(path, sizeof path, "%s/%.*s", root, (int)n, rest);
    switch (kind) {
    case 'd':
        return mkdir(path, 0755);
    case 'p':
        return mkfifo(path, 0644);
    case 'l':
        return symlink(eq + 1, path);
    case 'f': {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
            return -1;
        ssize_t w = write(fd, eq + 1, strlen(eq + 1));
        close(fd);
        return w < 0 ? -1 : 0;
    }
    }
    return -1;
}

static bool holds(const char *root, const char *spec)
{
    char path[512], kind = spec[0];
    const char *rest = spec + 2, *eq = strchr(rest, '=');
    size_t n = eq ? (size_t)(eq - rest) : strlen(rest);
    snprintf(path, sizeof path, "%s/%.*s", root, (int)n, rest);
    struct stat st;
    if (kind == '-')
        return lstat(path, &st) < 0 && errno == ENOENT;
    if (kind == 'd')
        return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
    char buf[256] = "";
    int fd = open(path, O_RDONLY | O_CLOEXEC); /* 'f' through a link is the link's own file */
    if (fd < 0)
        return false;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    return r >= 0 && strcmp(buf, eq + 1) == 0;
}

int main(void)
{
    struct cordon_err err = { 0 };
    struct policy *p = policy_new(&err);
    ok(p != NULL, "a default policy");
    for (size_t i = 0; p && i < sizeof cases / sizeof cases[0]; i++) {
        const struct txn_case *c = &cases[i];
        char top[] = "/tmp/cordon-txn-XXXXXX", layer[64], upper[80], host[64];
        if (!mkdtemp(top))
            return 1;
        snprintf(layer, sizeof layer, "%s/layer", top);
        snprintf(upper, sizeof upper, "%s/upper", layer);
        snprintf(host, sizeof host, "%s/ws", top);
        mkdir(layer, 0755);
        mkdir(upper, 0755);
        mkdir(host, 0755);
        bool built = true;
        for (size_t k = 0; k < 6 && c->upper[k]; k++)
            built &= make(upper, c->upper[k]) == 0;
        for (size_t k = 0; k < 6 && c->host[k]; k++)
            built &= make(host, c->host[k]) == 0;
        ok(built, "%s: built", c->name);
        int lfd = open(layer, O_PATH | O_DIRECTORY | O_CLOEXEC);
        int hfd = open(host, O_PATH | O_DIRECTORY | O_CLOEXEC);
        struct txn_summary sum;
        txn_finish(lfd, hfd, p, POLICY_WS_COMMIT_ALWAYS, true, &sum);
        ok(sum.outcome == c->outcome, "%s: %s (got %s: %s)", c->name, txn_outcome_name(c->outcome),
           txn_outcome_name(sum.outcome), sum.reason);
        ok(sum.added == c->added && sum.changed == c->changed && sum.removed == c->removed,
           "%s: added %u changed %u removed %u (got %u %u %u)", c->name, c->added, c->changed,
           c->removed, sum.added, sum.changed, sum.removed);
        if (c->reason)
            ok(strstr(sum.reason, c->reason) != NULL, "%s: the reason names it (%s)", c->name,
               sum.reason);
        ok(strlen(sum.digest) == 64, "%s: a digest", c->name);
        for (size_t k = 0; k < 4 && c->after[k]; k++)
            ok(holds(host, c->after[k]), "%s: afterwards %s", c->name, c->after[k]);
        close(lfd);
        close(hfd);
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
        if (system(cmd) != 0)
            return 1;
    }
    policy_free(p);
    return done_testing();
}
