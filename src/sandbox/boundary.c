/*
 * sandbox/boundary.c: what every level's boundary does the same way (see
 * boundary.h). Runs in the boundary between fork and exec, except the
 * supervisor's two helpers at the end.
 */
#include "sandbox/boundary.h"

#include "common/cleanup.h"

#include "common/fds.h"
#include "common/procfs.h"
#include "common/syscalls.h"
#include "policy/rules.h"
#include "sandbox/plan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *const sandbox_usr_links[SANDBOX_N_USR_LINKS] = {
    "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
};

const char *const sandbox_etc_files[SANDBOX_N_ETC_FILES] = {
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/protocols",
    "/etc/services",
    "/etc/mime.types",
    "/etc/gai.conf",
    "/etc/python3",
    "/etc/python3.11",
    "/etc/perl",
    "/etc/gitconfig",
    "/etc/bash.bashrc",
    "/etc/inputrc",
    "/etc/magic",
    "/etc/terminfo",
    "/etc/debian_version", /* pip (distro) reads it; EACCES at the process level fails it */
};

/* A look through an entry ends here: beyond, it is given as if all of it were unreadable. */
#define UNREADABLE_WALK_ENTRIES 4096
#define UNREADABLE_WALK_DEPTH 8

bool sandbox_readable_by_all(mode_t mode)
{
    if (S_ISLNK(mode))
        return true;
    if (S_ISDIR(mode))
        return (mode & (S_IROTH | S_IXOTH)) == (S_IROTH | S_IXOTH);
    return (mode & S_IROTH) != 0;
}

static void note_unreadable(struct sandbox_unreadable *u, const char *path, bool dir)
{
    char *copy = u->n < SANDBOX_UNREADABLE_MAX ? strdup(path) : NULL;
    if (!copy) {
        u->all = true;
        return;
    }
    u->dir[u->n] = dir;
    u->path[u->n++] = copy;
}

/* The directory AT, named PATH (LEN bytes, in a PATH_MAX buffer), looked through. */
static void walk_unreadable(struct sandbox_unreadable *u, int at, char *path, size_t len, int depth,
                            size_t *entries)
{
    int dup = openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
    if (!d) {
        if (dup >= 0)
            close(dup);
        u->all = true;
        return;
    }
    struct dirent *e;
    while (!u->all && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 || e->d_type == DT_LNK)
            continue;
        size_t nlen = strlen(e->d_name);
        struct stat st;
        if (++*entries > UNREADABLE_WALK_ENTRIES || depth >= UNREADABLE_WALK_DEPTH ||
            len + 1 + nlen >= PATH_MAX) {
            u->all = true;
            break;
        }
        if (fstatat(at, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            u->all |= errno != ENOENT; /* gone meanwhile: nothing to give */
            continue;
        }
        path[len] = '/';
        memcpy(path + len + 1, e->d_name, nlen + 1);
        if (!sandbox_readable_by_all(st.st_mode)) {
            note_unreadable(u, path, S_ISDIR(st.st_mode));
        } else if (S_ISDIR(st.st_mode)) {
            int sub = openat(at, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) {
                u->all = true;
            } else {
                walk_unreadable(u, sub, path, len + 1 + nlen, depth + 1, entries);
                close(sub);
            }
        }
        path[len] = '\0';
    }
    closedir(d);
}

void sandbox_find_unreadable(const char *entry, struct sandbox_unreadable *u)
{
    *u = (struct sandbox_unreadable){ 0 };
    struct stat st;
    char path[PATH_MAX];
    if (lstat(entry, &st) < 0) {
        u->all = errno != ENOENT; /* not on this host: nothing to give */
        return;
    }
    if (!sandbox_readable_by_all(st.st_mode) || strlen(entry) >= sizeof path) {
        u->all = true;
        return;
    }
    if (!S_ISDIR(st.st_mode))
        return;
    _cleanup_close_ int fd = open(entry, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        u->all = true;
        return;
    }
    size_t entries = 0;
    strcpy(path, entry);
    walk_unreadable(u, fd, path, strlen(path), 0, &entries);
}

void sandbox_unreadable_free(struct sandbox_unreadable *u)
{
    for (size_t i = 0; i < u->n; i++)
        free(u->path[i]);
    *u = (struct sandbox_unreadable){ 0 };
}

const char sandbox_passwd[] = "root:x:0:0:root:/root:/usr/sbin/nologin\n" SANDBOX_USER
                              ":x:1000:1000:cordon sandbox:/workspace:/bin/sh\n"
                              "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
const char sandbox_group[] = "root:x:0:\n" SANDBOX_USER ":x:1000:\nnogroup:x:65534:\n";
const char sandbox_hosts[] =
    "127.0.0.1\tlocalhost " SANDBOX_HOSTNAME "\n::1\tlocalhost ip6-localhost\n";
const char sandbox_hostname[] = SANDBOX_HOSTNAME "\n";

const char *const sandbox_dev_nodes[SANDBOX_N_DEV_NODES] = {
    "null", "zero", "full", "random", "urandom", "tty",
};

void sandbox_tmpfs_opts(char *out, size_t len, const char *base, uint64_t size, uint64_t inodes)
{
    if (inodes)
        snprintf(out, len, "%s,size=%llu,nr_inodes=%llu", base, (unsigned long long)size,
                 (unsigned long long)inodes);
    else
        snprintf(out, len, "%s,size=%llu", base, (unsigned long long)size);
}

const char *sandbox_nsswitch_conf(bool transparent)
{
    return transparent ? "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
                         "networks: files\nprotocols: files\nservices: files\n"
                       : "passwd: files\ngroup: files\nshadow: files\nhosts: files\n"
                         "networks: files\nprotocols: files\nservices: files\n";
}

/* Transparent egress: the gateway's DNS stub (DNS_STUB_ADDR), nothing else. */
const char *sandbox_resolv_conf(bool transparent)
{
    return transparent ? "nameserver 127.0.0.53\noptions attempts:2 timeout:2\n" : "";
}

_Noreturn void boundary_fail(int err_w, struct cordon_err *err)
{
    (void)!write(err_w, err, sizeof *err);
    _exit(err_exit_code(err));
}

void boundary_scrub_args_and_env(const char *name)
{
    prctl(PR_SET_NAME, name, 0, 0, 0);
    char buf[1024];
    const char *stat = proc_stat_self(buf, sizeof buf);
    unsigned long long v[4] = { 0 };
    for (int field = 48; field <= 51; field++) /* arg_start, arg_end, env_start, env_end */
        if (!stat || !proc_stat_field(stat, field, &v[field - 48]))
            return;
    size_t len = strlen(name) + 1;
    if (v[1] > v[0] + len) {
        memset((void *)(uintptr_t)v[0], 0, v[1] - v[0]);
        memcpy((void *)(uintptr_t)v[0], name, len);
    }
    if (v[3] > v[2])
        memset((void *)(uintptr_t)v[2], 0, v[3] - v[2]);
}

static pid_t forward_to; /* the boundary's own process: where its signals go */

static void forward_signal(int sig)
{
    int saved = errno;
    if (kill(-forward_to, sig) < 0) /* before the command's setsid() */
        kill(forward_to, sig);
    errno = saved;
}

void boundary_forward_signals(pid_t to)
{
    static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
    forward_to = to;
    struct sigaction sa = { .sa_handler = forward_signal, .sa_flags = SA_RESTART };
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaction(forwarded[i], &sa, NULL);
    /* The supervisor's mask came along through fork: open it now. */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

bool boundary_receive_filter(int fd, struct seccomp_program *out)
{
    static struct sock_filter insns[BPF_MAXINSNS];
    unsigned short len = 0;
    if (!read_full(fd, &len, sizeof len) || len == 0 || len > BPF_MAXINSNS ||
        !read_full(fd, insns, len * sizeof insns[0]))
        return false;
    *out = (struct seccomp_program){ .filter = insns, .len = len };
    return true;
}

_Noreturn void boundary_exec(const struct start_message *m, int tty, const char *workdir, int err_w,
                             int (*confine)(void *arg, struct cordon_err *err), void *arg)
{
    struct cordon_err err = { 0 };
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);

    /* A session of its own: no controlling terminal to inject input into. */
    if (setsid() < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot start a session");
        boundary_fail(err_w, &err);
    }
    /* With a terminal: the sandbox's own pty, made this session's controlling one. */
    const int *in = tty >= 0 ? (const int[3]){ tty, tty, tty } : m->stdio;
    if ((tty >= 0 && ioctl(tty, TIOCSCTTY, 0) < 0) || dup2(in[0], 0) < 0 || dup2(in[1], 1) < 0 ||
        dup2(in[2], 2) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot set up stdio");
        boundary_fail(err_w, &err);
    }
    /* Whatever else is open dies at exec, the error pipe included. */
    if (sys_close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot mark descriptors close-on-exec");
        boundary_fail(err_w, &err);
    }
    if (chdir(workdir) < 0) {
        err_sys(&err, CORDON_E_SETUP, "cannot enter '%s'", workdir);
        boundary_fail(err_w, &err);
    }
    if (confine(arg, &err) < 0)
        boundary_fail(err_w, &err);

    /* execvpe() searches the PATH of environ, not of its envp: the run's own. */
    environ = m->envp;
    execvpe(m->argv[0], m->argv, m->envp);
    if (errno == ENOENT || errno == ENOTDIR)
        err_set(&err, CORDON_E_NOTFOUND, "command not found: '%s'", m->argv[0]);
    else
        err_sys(&err,
                errno == EACCES || errno == ENOEXEC || errno == EISDIR || errno == EPERM
                    ? CORDON_E_NOEXEC
                    : CORDON_E_SETUP,
                "cannot execute '%s'", m->argv[0]);
    boundary_fail(err_w, &err);
}

/* ---- supervisor side ---- */

int boundary_send_filter(const struct policy *p, struct seccomp_program *prog, int fd,
                         struct cordon_err *err)
{
    TRY(seccomp_program_build(p, prog, err));
    /* One write well under the pipe's capacity (2 + 8 * 4096 bytes at most). */
    size_t size = sizeof prog->len + prog->len * sizeof prog->filter[0];
    char buf[sizeof prog->len + BPF_MAXINSNS * sizeof(struct sock_filter)];
    memcpy(buf, &prog->len, sizeof prog->len);
    memcpy(buf + sizeof prog->len, prog->filter, prog->len * sizeof prog->filter[0]);
    ssize_t n = write(fd, buf, size);
    if (n < 0 && errno == EPIPE)
        return 0; /* the child failed first: its own error record says why */
    if (n != (ssize_t)size)
        return err_sys(err, CORDON_E_SETUP, "cannot hand the seccomp filter to the sandbox");
    return 0;
}

void boundary_release(struct sandbox_boundary *b)
{
    if (b->pid > 0) {
        kill(b->pid, SIGKILL);
        waitpid(b->pid, NULL, 0);
        b->pid = -1;
    }
    int *fds[] = { &b->err_r, &b->status_r, &b->start_w, &b->door, &b->layer };
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        closep(fds[i]);
        *fds[i] = -1;
    }
    for (size_t i = 0; i < b->n_extra_doors; i++)
        closep(&b->extra_doors[i]);
    b->n_extra_doors = 0;
}

int boundary_child_error(int err_r, struct cordon_err *err)
{
    struct cordon_err rec;
    if (read_full(err_r, &rec, sizeof rec)) {
        rec.msg[sizeof rec.msg - 1] = '\0';
        *err = rec;
        return -1;
    }
    return err_set(err, CORDON_E_SETUP, "the sandbox failed while it was being built");
}

int sandbox_ca_bundle(const char *ca_pem, char **out, size_t *len, struct cordon_err *err)
{
    *out = NULL;
    *len = 0;
    FILE *mem = open_memstream(out, len);
    if (!mem)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    _cleanup_fclose_ FILE *f = fopen("/etc/ssl/certs/ca-certificates.crt", "re");
    if (f) {
        char buf[8192];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            fwrite(buf, 1, n, mem);
    }
    fputs(ca_pem, mem);
    if (fclose(mem) != 0) {
        free(*out);
        *out = NULL;
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    }
    return 0;
}

int boundary_private_dir(const struct sandbox_setup *s, const char *base, const char *kind,
                         char *out, size_t size, struct cordon_err *err)
{
    static const char chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char r[6];
    char suffix[sizeof r + 1];
    out[0] = '\0';
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return err_sys(err, CORDON_E_SETUP, "cannot name a private directory in %s", base);
    for (size_t i = 0; i < sizeof r; i++)
        suffix[i] = chars[r[i] % (sizeof chars - 1)];
    suffix[sizeof r] = '\0';
    /* Named by its maker, as the run's other host entries are (cgroups): whose it is shows. */
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s/cordon-%s-%d-%s", base, kind, (int)getpid(), suffix) >=
        (int)size)
        return err_set(err, CORDON_E_INTERNAL, "private directory name too long");
    /* A random name cannot be taken before us; one that is, is refused, never shared. */
    if (s->guard_dir && s->guard_dir(s->guard_arg, dir, err) < 0)
        return -1;
    if (mkdir(dir, 0700) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot make the run's directory '%s'", dir);
    snprintf(out, size, "%s", dir);
    return 0;
}

size_t boundary_transparent_ports(const struct policy *p, uint16_t ports[SYNTH_MAX_PORTS],
                                  uint32_t *nets, unsigned *prefixes, size_t max_nets,
                                  size_t *n_nets)
{
    uint16_t named[SYNTH_MAX_PORTS];
    size_t n = egress_rules_name_ports(&p->egress.rules, named, SYNTH_MAX_PORTS), kept = 0;
    if (nets)
        *n_nets = egress_rules_literal_v4(&p->egress.rules, nets, prefixes, max_nets, named, &n,
                                          SYNTH_MAX_PORTS);
    for (size_t i = 0; i < n; i++)
        if (named[i] != GATEWAY_PORT)
            ports[kept++] = named[i];
    return kept;
}
