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
    const char *host[6]; /* "r:path" makes a path 0555 (after what it holds) */
    enum txn_outcome outcome;
    unsigned added, changed, removed;
    const char *reason;   /* a part of the refusal, or NULL */
    const char *after[4]; /* on the host afterwards: "f:path=content", "d:path", "-:path" */
};

static const struct txn_case cases[] = {
    { "new file and directory",
      { "f:a.txt=x", "d:d", "f:d/f=yz" },
      { 0 },
      TXN_COMMITTED,
      3,
      0,
      0,
      NULL,
      { "f:a.txt=x", "f:d/f=yz" } },
    { "changed file",
      { "f:a.txt=new" },
      { "f:a.txt=old" },
      TXN_COMMITTED,
      0,
      1,
      0,
      NULL,
      { "f:a.txt=new" } },
    { "copied up but unchanged",
      { "f:a.txt=same" },
      { "f:a.txt=same" },
      TXN_COMMITTED,
      0,
      0,
      0,
      NULL,
      { "f:a.txt=same" } },
    { "a FIFO",
      { "f:a.txt=x", "p:fifo" },
      { 0 },
      TXN_REFUSED,
      1,
      0,
      0,
      "'fifo' is a device, FIFO or socket",
      { "-:a.txt" } },
    { "a protected name at the top",
      { "f:a.txt=x", "f:.env=K=v" },
      { 0 },
      TXN_REFUSED,
      2,
      0,
      0,
      "'.env' is protected",
      { "-:a.txt", "-:.env" } },
    { "a protected name deep down",
      { "d:v", "d:v/w", "d:v/w/.vscode", "f:v/w/.vscode/tasks.json=x" },
      { 0 },
      TXN_REFUSED,
      4,
      0,
      0,
      "'v/w/.vscode' is protected",
      { "-:v" } },
    { "a link leading out",
      { "f:a.txt=x", "l:out=/etc/passwd" },
      { 0 },
      TXN_REFUSED,
      2,
      0,
      0,
      "'out' is a link leading out",
      { "-:a.txt" } },
    { "a link climbing out",
      { "d:d", "l:d/up=../../x" },
      { 0 },
      TXN_REFUSED,
      2,
      0,
      0,
      "'d/up' is a link leading out",
      { "-:d" } },
    { "a link staying in",
      { "d:d", "l:d/ok=../a.txt" },
      { "f:a.txt=x" },
      TXN_COMMITTED,
      2,
      0,
      0,
      NULL,
      { "f:d/ok=x" } },
    /* The host's "sub" is a link out (planted earlier): the layer's directory
     * replaces it, and nothing is written where it pointed. */
    { "a host link under a new directory",
      { "d:sub", "f:sub/f=pwned" },
      { "d:../outside", "l:sub=../outside" },
      TXN_COMMITTED,
      1,
      1,
      0,
      NULL,
      { "d:sub", "f:sub/f=pwned", "-:../outside/f" } },
    { "a host directory replaced by a file",
      { "f:d=file" },
      { "d:d", "f:d/x=x" },
      TXN_COMMITTED,
      0,
      1,
      0,
      NULL,
      { "f:d=file" } },
    /* Replacing a directory removes what is in it: a protected name there refuses. */
    { "a protected name under a replaced directory",
      { "f:d=file" },
      { "d:d", "d:d/.vscode", "f:d/.vscode/tasks.json=t" },
      TXN_REFUSED,
      0,
      1,
      0,
      "'d/.vscode' is protected",
      { "f:d/.vscode/tasks.json=t" } },
    /* The names a commit makes for itself: never from a run's layer. */
    { "a commit's own name",
      { "f:a.txt=x", "d:.cordon-txn-0123456789abcdef",
        "f:.cordon-txn-0123456789abcdef/committed=" },
      { 0 },
      TXN_REFUSED,
      3,
      0,
      0,
      "is a name cordon's commit uses",
      { "-:a.txt" } },
    /* A new read-only directory with entries: its mode is set last. */
    { "a new 0555 directory holding entries",
      { "d:ro", "d:ro/sub", "f:ro/sub/f=x", "r:ro/sub", "r:ro" },
      { "d:keep" },
      TXN_COMMITTED,
      3,
      0,
      0,
      NULL,
      { "f:ro/sub/f=x", "5:ro", "5:ro/sub" } },
    { "a directory replaced by a file, a file by a directory",
      { "f:d=file", "d:f", "f:f/in=y" },
      { "d:d", "f:d/x=x", "f:f=old" },
      TXN_COMMITTED,
      1,
      2,
      0,
      NULL,
      { "f:d=file", "f:f/in=y", "-:d/x" } },
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
    case 'r':
        return chmod(path, 0555);
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
        return lstat(path, &st) < 0 && (errno == ENOENT || errno == ENOTDIR);
    if (kind == 'd')
        return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
    if (kind == '5')
        return lstat(path, &st) == 0 && (st.st_mode & 07777) == 0555;
    char buf[256] = "";
    int fd = open(path, O_RDONLY | O_CLOEXEC); /* 'f' through a link is the link's own file */
    if (fd < 0)
        return false;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    return r >= 0 && strcmp(buf, eq + 1) == 0;
}

/* ---- recovery of a commit that died, from journals written by hand ---- */

#define ID "0123456789abcdef"
#define TXN ".cordon-txn-" ID

static void put(const char *root, const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        (void)!write(fd, text, strlen(text));
        close(fd);
    }
}

static unsigned long long ino(const char *root, const char *rel)
{
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", root, rel);
    return lstat(path, &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

static const char *hex(const char *s)
{
    static char out[4][256];
    static int turn;
    char *o = out[turn++ & 3];
    for (size_t i = 0; s[i] && i < 120; i++)
        snprintf(o + 2 * i, 3, "%02x", (unsigned char)s[i]);
    return o;
}

static bool reserved_left(const char *root)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "find '%s' -name '.cordon-txn-*' | grep -q .", root);
    return system(cmd) == 0;
}

/* A fresh workspace under TOP with the transaction directory made. */
static int fresh(char top[64], char ws[80])
{
    snprintf(top, 64, "/tmp/cordon-txnrec-XXXXXX");
    if (!mkdtemp(top))
        return -1;
    snprintf(ws, 80, "%s/ws", top);
    char d[160];
    snprintf(d, sizeof d, "%s/" TXN, ws);
    return mkdir(ws, 0755) == 0 && mkdir(d, 0700) == 0 ? 0 : -1;
}

static int recover(const struct policy *p, const char *ws, struct txn_recovery *rec)
{
    int fd = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
    int rc = txn_recover(fd, p, 0, rec);
    close(fd);
    return rc;
}

static void cleanup(const char *top)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' && rm -rf '%s'", top, top);
    (void)!system(cmd);
}

/* Each state of the protocol (txn.c), left as a killed commit leaves it. */
static void test_states(const struct policy *p)
{
    char top[64], ws[80], j[4096];
    struct txn_recovery rec;

    /* STAGING: intent written, entries staged; nothing of the host's touched. */
    if (fresh(top, ws) < 0)
        return;
    put(ws, "a.txt", "old-a");
    put(ws, TXN ".0", "new-a");
    char d[160];
    snprintf(d, sizeof d, "%s/" TXN ".1", ws);
    mkdir(d, 0700);
    put(d, "f", "new-f");
    snprintf(j, sizeof j, "cordon-txn 1 " ID "\nput 0 0 644 %s\nput 0 0 0 %s\nend\n", hex("a.txt"),
             hex("d"));
    put(ws, TXN "/intent", j);
    ok(recover(p, ws, &rec) == 0 && rec.rolled_back == 1, "staging: undone (%s)", rec.reason);
    ok(holds(ws, "f:a.txt=old-a") && holds(ws, "-:d") && !reserved_left(ws),
       "staging: the old tree, nothing staged left");
    cleanup(top);

    /* APPLYING: a.txt swapped in, b.txt not yet, c.txt moved aside. */
    if (fresh(top, ws) < 0)
        return;
    put(ws, "a.txt", "old-a");
    put(ws, "b.txt", "old-b");
    put(ws, "c.txt", "old-c");
    put(ws, TXN ".0", "new-a");
    put(ws, TXN ".1", "new-b");
    unsigned long long na = ino(ws, TXN ".0"), oa = ino(ws, "a.txt"), nb = ino(ws, TXN ".1"),
                       ob = ino(ws, "b.txt"), oc = ino(ws, "c.txt");
    char from[160], to[160];
    snprintf(from, sizeof from, "%s/" TXN ".0", ws);
    snprintf(to, sizeof to, "%s/a.txt", ws);
    renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE);
    snprintf(from, sizeof from, "%s/c.txt", ws);
    snprintf(to, sizeof to, "%s/" TXN ".2.old", ws);
    rename(from, to);
    snprintf(j, sizeof j,
             "cordon-txn 1 " ID "\nput %llu %llu 0 %s\nput %llu %llu 0 %s\n"
             "del 0 %llu 0 %s\nend\n",
             na, oa, hex("a.txt"), nb, ob, hex("b.txt"), oc, hex("c.txt"));
    put(ws, TXN "/intent", j);
    put(ws, TXN "/journal", j);
    ok(recover(p, ws, &rec) == 0 && rec.rolled_back == 1, "applying: undone (%s)", rec.reason);
    ok(holds(ws, "f:a.txt=old-a") && holds(ws, "f:b.txt=old-b") && holds(ws, "f:c.txt=old-c") &&
           !reserved_left(ws),
       "applying: the old tree by inode, nothing staged left");

    /* The same, past the marker (b.txt's rename lost, as a power loss can), and a mode. */
    put(ws, TXN ".0", "new-a");
    put(ws, TXN ".1", "new-b");
    na = ino(ws, TXN ".0");
    oa = ino(ws, "a.txt");
    nb = ino(ws, TXN ".1");
    ob = ino(ws, "b.txt");
    oc = ino(ws, "c.txt");
    snprintf(d, sizeof d, "%s/" TXN, ws);
    mkdir(d, 0700);
    snprintf(from, sizeof from, "%s/" TXN ".0", ws);
    snprintf(to, sizeof to, "%s/a.txt", ws);
    renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE);
    snprintf(from, sizeof from, "%s/c.txt", ws);
    snprintf(to, sizeof to, "%s/" TXN ".2.old", ws);
    rename(from, to);
    snprintf(d, sizeof d, "%s/n", ws);
    mkdir(d, 0700);
    snprintf(j, sizeof j,
             "cordon-txn 1 " ID "\nput %llu %llu 0 %s\nput %llu %llu 0 %s\n"
             "del 0 %llu 0 %s\nmode 0 0 555 %s\nend\n",
             na, oa, hex("a.txt"), nb, ob, hex("b.txt"), oc, hex("c.txt"), hex("n"));
    put(ws, TXN "/journal", j);
    put(ws, TXN "/committed", "");
    ok(recover(p, ws, &rec) == 0 && rec.rolled_forward == 1, "committed: finished (%s)",
       rec.reason);
    ok(holds(ws, "f:a.txt=new-a") && holds(ws, "f:b.txt=new-b") && holds(ws, "-:c.txt") &&
           holds(ws, "5:n") && !reserved_left(ws),
       "committed: the new tree, the lost rename made again, modes set, nothing left");
    cleanup(top);
}

/* Journals a run could have planted: refused, and nothing of them done. */
static void test_forged(const struct policy *p)
{
    static const struct {
        const char *kind, *rel, *tail, *what;
    } bad[] = {
        { "put 1 0 0", ".vscode/tasks.json", "", "a protected name" },
        { "put 1 0 0", "../../etc/x", "", "climbing out" },
        { "put 1 0 0", TXN ".3", "", "a reserved name" },
        { "put 1 0 0", "a", " extra", "trailing words" },
        { "mode 0 0 4755", "a", "", "a set-id mode" },
        { "put 1 0 0", "/etc/x", "", "an absolute path" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char top[64], ws[80], j[700];
        struct txn_recovery rec;
        if (fresh(top, ws) < 0)
            return;
        put(ws, TXN ".0", "planted");
        snprintf(j, sizeof j, "cordon-txn 1 " ID "\n%s %s%s\nend\n", bad[i].kind, hex(bad[i].rel),
                 bad[i].tail);
        put(ws, TXN "/journal", j);
        put(ws, TXN "/committed", "");
        ok(recover(p, ws, &rec) < 0 && strstr(rec.reason, "holds no journal cordon wrote"),
           "forged journal, %s: refused (%s)", bad[i].what, rec.reason);
        ok(holds(ws, "f:" TXN ".0=planted") && holds(ws, "-:a") && holds(ws, "-:.git"),
           "forged journal, %s: left alone, nothing moved", bad[i].what);
        cleanup(top);
    }
    /* Cut short: no end line. */
    char top[64], ws[80];
    struct txn_recovery rec;
    if (fresh(top, ws) < 0)
        return;
    char j[300];
    snprintf(j, sizeof j, "cordon-txn 1 " ID "\nput 1 0 0 %s\n", hex("a"));
    put(ws, TXN "/journal", j);
    ok(recover(p, ws, &rec) < 0 && strstr(rec.reason, "holds no journal"),
       "a journal cut short is refused");
    cleanup(top);
    /* The header names another transaction. */
    if (fresh(top, ws) < 0)
        return;
    put(ws, TXN "/journal", "cordon-txn 1 fedcba9876543210\nend\n");
    put(ws, TXN "/committed", "");
    ok(recover(p, ws, &rec) < 0, "a journal of another transaction is refused");
    cleanup(top);
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
        char cmd[160];
        snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' && rm -rf '%s'", top, top);
        if (system(cmd) != 0)
            return 1;
    }
    if (p) {
        test_states(p);
        test_forged(p);
    }
    policy_free(p);
    return done_testing();
}
