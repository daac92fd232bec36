/*
 * oci/spec.c: an OCI bundle's config.json read into what cordon builds (a
 * sandbox_container, the command, the limits) and the policy chosen for it
 * from its annotations. Everything cordon cannot do with a spec is refused
 * here, before any host state exists, with one line naming it: nothing of a
 * spec is dropped in silence.
 */
#include "oci/oci.h"

#include "common/json.h"

#include "common/cleanup.h"
#include "common/strv.h"
#include "common/syscalls.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* The built-in policy when the admin wrote no oci.yaml: cordon's defaults. */
static const char default_policy[] = "version: 1\n";

/* A container outlives a tool call: the per-call limits apply only when written. */
static void container_limits(struct policy *p)
{
    unsigned defaulted = p->limits.defaulted;
    if (defaulted & (1u << POLICY_LIMIT_WALL))
        p->limits.wall_ms = 0;
    if (defaulted & (1u << POLICY_LIMIT_CPU))
        p->limits.cpu_ms = 0;
    if (defaulted & (1u << POLICY_LIMIT_OUTPUT))
        p->limits.output = 0;
}

/* An admin's file: owned by root (or us) and writable by nobody else. */
static int admin_owned(const char *path, struct cordon_err *err)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return err_sys(err, CORDON_E_POLICY, "cannot read '%s'", path);
    if ((st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & (S_IWGRP | S_IWOTH)))
        return err_set(err, CORDON_E_POLICY,
                       "'%s' is not the administrator's (owned by uid %u, "
                       "mode %03o): cordon-oci reads policies only from files nobody else "
                       "can write",
                       path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
    return 0;
}

static const char *annotation(const json_t *config, const char *key)
{
    return json_string_value(json_object_get(json_object_get(config, "annotations"), key));
}

/* run.cordon.policy names a file in CONFIG_DIR/oci/, else CONFIG_DIR/oci.yaml, else the defaults. */
static int choose_policy(struct oci_spec *s, struct cordon_err *err)
{
    const char *name = annotation(s->config, "run.cordon.policy");
    if (!name)
        name = oci_opts.policy; /* the engine's runtime entry's default, as trusted */
    char dir[2048];
    if (snprintf(dir, sizeof dir, "%s/oci", oci_opts.config_dir) >= (int)sizeof dir)
        return err_set(err, CORDON_E_USAGE, "CORDON_OCI_DIR is too long");
    if (name && strlen(name) > 255)
        return err_set(err, CORDON_E_POLICY, "annotation run.cordon.policy: too long");
    if (name) {
        if (!*name || *name == '.' ||
            strspn(name,
                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOP"
                   "QRSTUVWXYZ0123456789._-") != strlen(name))
            return err_set(err, CORDON_E_POLICY,
                           "annotation run.cordon.policy: '%s' is not a "
                           "policy name (letters, digits, '.', '_', '-')",
                           name);
        snprintf(s->policy_file, sizeof s->policy_file, "%s/%s", dir, name);
        if (access(s->policy_file, F_OK) < 0 && !strchr(name, '.'))
            snprintf(s->policy_file, sizeof s->policy_file, "%s/%s.yaml", dir, name);
        TRY(admin_owned(dir, err));
    } else {
        snprintf(s->policy_file, sizeof s->policy_file, "%s/oci.yaml", oci_opts.config_dir);
        if (access(s->policy_file, F_OK) < 0 && errno == ENOENT)
            s->policy_file[0] = '\0';
    }
    if (s->policy_file[0]) {
        TRY(admin_owned(s->policy_file, err));
        s->policy = policy_load(s->policy_file, err);
    } else {
        s->policy = policy_load_string(default_policy, sizeof default_policy - 1,
                                       "built-in oci policy", err);
    }
    if (!s->policy)
        return err_prefix(err, "policy");
    const char *level = annotation(s->config, "run.cordon.level");
    if (level) {
        char text[64];
        snprintf(text, sizeof text, "%s", level);
        enum cordon_level was = s->policy->level;
        if (policy_set(s->policy, "isolation", text, "annotation run.cordon.level", err) < 0)
            return -1;
        /* An annotation is the pod's: it may ask for a stronger level, never a weaker one. */
        if (s->policy->level < was)
            return err_set(err, CORDON_E_POLICY,
                           "annotation run.cordon.level: '%s' is weaker "
                           "than the policy's '%s'",
                           level, cordon_level_name(was));
    }
    container_limits(s->policy);
    if (policy_finalize(s->policy, err) < 0)
        return err_prefix(err, "policy");
    const char *digest = annotation(s->config, "run.cordon.policy-digest");
    const struct policy_evidence *ev = policy_evidence(s->policy);
    if (digest && strcmp(digest, ev->policy) != 0 &&
        !(strncmp(digest, "sha256:", 7) == 0 && strcmp(digest + 7, ev->policy) == 0))
        return err_set(err, CORDON_E_POLICY,
                       "annotation run.cordon.policy-digest: the policy "
                       "'%s' has digest %s, not %s",
                       s->policy_file[0] ? s->policy_file : "(built in)", ev->policy, digest);
    if (s->policy->level == CORDON_LEVEL_MICROVM)
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "the microvm level cannot run an engine's "
                       "bundle yet: its root, the engine's stdio, signals and cgroup would "
                       "have to reach a guest kernel; use the namespace, process or gvisor "
                       "level");
    if (s->policy->workspace || s->policy->n_binds)
        return err_set(err, CORDON_E_POLICY,
                       "policy: a container's files are its bundle's and "
                       "its mounts: filesystem.workspace and binds do not apply");
    if (s->policy->limits.output)
        return err_set(err, CORDON_E_POLICY,
                       "policy: limits.output: a container's output goes "
                       "to its engine, not through cordon");
    return 0;
}

/* ---- pieces of the spec ---- */

static char *dup_path(const char *base, const char *path)
{
    char *out = NULL;
    if (path[0] == '/')
        return strdup(path);
    return asprintf(&out, "%s/%s", base, path) < 0 ? NULL : out;
}

static int strv_from(const json_t *arr, char ***out, size_t *n, const char *what,
                     struct cordon_err *err)
{
    *out = NULL;
    *n = 0;
    if (!arr)
        return 0;
    if (!json_is_array(arr))
        return err_set(err, CORDON_E_USAGE, "config.json: %s is not a list", what);
    char **v = calloc(json_array_size(arr) + 1, sizeof *v);
    if (!v)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        if (!json_is_string(e) || !(v[i] = strdup(json_string_value(e)))) {
            strv_free(v);
            return err_set(err, CORDON_E_USAGE, "config.json: %s holds a non-string", what);
        }
    }
    *out = v;
    *n = json_array_size(arr);
    return 0;
}

/* The mount options cordon honours; any other is refused, not dropped. */
static int mount_options(const json_t *opts, const char *dest, bool *ro, char *data, size_t size,
                         struct cordon_err *err)
{
    static const char *const ignored[] = {
        /* cordon mounts nosuid, nodev and private already; bind is rbind */
        "nosuid",      "nodev",    "noexec",  "rw",         "bind",   "rbind",
        "private",     "rprivate", "slave",   "rslave",     "shared", "rshared",
        "strictatime", "relatime", "noatime", "nodiratime", "exec",   "suid",
        "dev",         "sync",     "async",   "norelatime",
    };
    size_t i, used = 0;
    json_t *o;
    *ro = false;
    data[0] = '\0';
    json_array_foreach(opts, i, o)
    {
        const char *t = json_string_value(o);
        if (!t)
            return err_set(err, CORDON_E_USAGE, "config.json: mount '%s': bad option", dest);
        if (!strcmp(t, "ro")) {
            *ro = true;
            continue;
        }
        bool known = false;
        for (size_t k = 0; k < sizeof ignored / sizeof ignored[0]; k++)
            known |= strcmp(t, ignored[k]) == 0;
        if (known)
            continue;
        if (strchr(t, '=')) { /* mode=755, size=65536k, newinstance's gid=5 ... */
            used += (size_t)snprintf(data + used, size > used ? size - used : 0, "%s%s",
                                     used ? "," : "", t);
            continue;
        }
        if (!strcmp(t, "newinstance")) {
            used += (size_t)snprintf(data + used, size > used ? size - used : 0, "%s%s",
                                     used ? "," : "", t);
            continue;
        }
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "mount '%s': option '%s' is not one cordon "
                       "applies",
                       dest, t);
    }
    return used < size ? 0 : err_set(err, CORDON_E_USAGE, "mount '%s': options too long", dest);
}

static int one_mount(const json_t *m, struct container_mount *out, struct cordon_err *err)
{
    const char *dest = json_string_value(json_object_get(m, "destination"));
    const char *type = json_string_value(json_object_get(m, "type"));
    const char *source = json_string_value(json_object_get(m, "source"));
    if (!dest || dest[0] != '/' || strstr(dest, "/../") || strcmp(dest, "/") == 0)
        return err_set(err, CORDON_E_USAGE,
                       "config.json: a mount's destination '%s' is not an "
                       "absolute path below /",
                       dest ? dest : "");
    char data[512];
    bool ro;
    TRY(mount_options(json_object_get(m, "options"), dest, &ro, data, sizeof data, err));
    bool bind = type && !strcmp(type, "bind");
    const json_t *opts = json_object_get(m, "options");
    size_t i;
    json_t *o;
    json_array_foreach(opts, i, o)
    {
        const char *t = json_string_value(o);
        bind |= t && (!strcmp(t, "bind") || !strcmp(t, "rbind"));
    }
    *out = (struct container_mount){ .readonly = ro };
    if (bind) {
        struct stat st;
        if (!source || source[0] != '/')
            return err_set(err, CORDON_E_USAGE, "mount '%s': a bind needs an absolute source",
                           dest);
        if (stat(source, &st) < 0)
            return err_sys(err, CORDON_E_SETUP, "mount '%s': cannot find '%s'", dest, source);
        out->type = CONTAINER_BIND;
        out->device = S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode);
        out->source = strdup(source);
    } else if (type && !strcmp(type, "tmpfs")) {
        if (ro)
            return err_set(err, CORDON_E_UNSUPPORTED,
                           "mount '%s': a read-only tmpfs is not one "
                           "cordon makes",
                           dest);
        out->type = CONTAINER_TMPFS;
    } else if (type && !strcmp(type, "proc")) {
        out->type = CONTAINER_PROC;
    } else if (type && !strcmp(type, "sysfs")) {
        out->type = CONTAINER_SYSFS;
        out->readonly = true;
    } else if (type && !strcmp(type, "devpts")) {
        out->type = CONTAINER_DEVPTS;
        snprintf(data, sizeof data, "newinstance,ptmxmode=0666,mode=0620");
    } else if (type && !strcmp(type, "mqueue")) {
        out->type = CONTAINER_MQUEUE;
    } else if (type && !strcmp(type, "cgroup")) {
        out->type = CONTAINER_CGROUP;
        out->readonly = true;
    } else {
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "mount '%s': type '%s' is not one cordon "
                       "mounts",
                       dest, type ? type : "(none)");
    }
    out->dest = strdup(dest);
    out->data = data[0] ? strdup(data) : NULL;
    if (!out->dest || (out->type == CONTAINER_BIND && !out->source))
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    return 0;
}

static int mounts(struct oci_spec *s, struct cordon_err *err)
{
    const json_t *arr = json_object_get(s->config, "mounts");
    size_t n = json_array_size(arr);
    s->c.mounts = calloc(n + 1, sizeof *s->c.mounts);
    if (!s->c.mounts)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        TRY(one_mount(json_array_get(arr, i), &s->c.mounts[i], err));
        s->c.n_mounts++;
    }
    return 0;
}

void oci_caps_parse(const json_t *list, uint64_t *out)
{
    static const char *const names[] = {
        "CHOWN",
        "DAC_OVERRIDE",
        "DAC_READ_SEARCH",
        "FOWNER",
        "FSETID",
        "KILL",
        "SETGID",
        "SETUID",
        "SETPCAP",
        "LINUX_IMMUTABLE",
        "NET_BIND_SERVICE",
        "NET_BROADCAST",
        "NET_ADMIN",
        "NET_RAW",
        "IPC_LOCK",
        "IPC_OWNER",
        "SYS_MODULE",
        "SYS_RAWIO",
        "SYS_CHROOT",
        "SYS_PTRACE",
        "SYS_PACCT",
        "SYS_ADMIN",
        "SYS_BOOT",
        "SYS_NICE",
        "SYS_RESOURCE",
        "SYS_TIME",
        "SYS_TTY_CONFIG",
        "MKNOD",
        "LEASE",
        "AUDIT_WRITE",
        "AUDIT_CONTROL",
        "SETFCAP",
        "MAC_OVERRIDE",
        "MAC_ADMIN",
        "SYSLOG",
        "WAKE_ALARM",
        "BLOCK_SUSPEND",
        "AUDIT_READ",
        "PERFMON",
        "BPF",
        "CHECKPOINT_RESTORE",
    };
    *out = 0;
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        const char *t = json_string_value(e);
        if (t && !strncasecmp(t, "CAP_", 4))
            t += 4;
        size_t k = 0;
        while (t && k < sizeof names / sizeof names[0] && strcasecmp(t, names[k]))
            k++;
        if (!t || k == sizeof names / sizeof names[0]) {
            /* As runc: a capability this runtime does not know is none it grants. */
            oci_log("warning", "config.json: unknown capability '%s' ignored",
                    json_string_value(e) ? json_string_value(e) : "?");
            continue;
        }
        *out |= 1ull << k;
    }
}

static int rlimits(const json_t *list, struct sandbox_container *c, struct cordon_err *err);

/* UID's home in the root's /etc/passwd, looked up beneath ROOT (its links stay in it). */
static bool passwd_home(const char *root, uid_t uid, char *out, size_t size)
{
    _cleanup_close_ int dir = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct open_how how = { .flags = O_RDONLY | O_CLOEXEC,
                            .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
    int fd = dir < 0 ? -1 : sys_openat2(dir, "etc/passwd", &how, sizeof how);
    _cleanup_fclose_ FILE *f = fd < 0 ? NULL : fdopen(fd, "re");
    if (!f && fd >= 0)
        close(fd);
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        char *field[7] = { line }, *p = line;
        int n = 1;
        while (n < 7 && (p = strchr(p, ':'))) {
            *p++ = '\0';
            field[n++] = p;
        }
        if (n == 7 && strtoul(field[2], NULL, 10) == uid && field[5][0] == '/') {
            snprintf(out, size, "%s", field[5]);
            return true;
        }
    }
    return false;
}

/* HOME where the process's environment has none: from the root's passwd, else runc's rule. */
static int add_home(struct oci_spec *s, struct cordon_err *err)
{
    size_t n = 0;
    for (char **e = s->env; e && *e; e++, n++)
        if (!strncmp(*e, "HOME=", 5))
            return 0;
    char home[512];
    if (!passwd_home(s->root, s->c.uid, home, sizeof home))
        snprintf(home, sizeof home, "%s", s->c.uid == 0 ? "/root" : "/");
    char **env = realloc(s->env, (n + 2) * sizeof *env);
    if (!env)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    s->env = env;
    if (asprintf(&env[n], "HOME=%s", home) < 0)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    env[n + 1] = NULL;
    return 0;
}

/* process: args, env, cwd, user, capabilities, rlimits, terminal. */
int oci_spec_process(const json_t *proc, struct oci_spec *s, struct cordon_err *err)
{
    size_t n;
    if (!json_is_object(proc))
        return err_set(err, CORDON_E_USAGE, "config.json: no process");
    strv_free(s->argv);
    strv_free(s->env);
    s->argv = s->env = NULL;
    s->c.n_rlimits = 0;
    json_decref(s->process);
    s->process = json_incref((json_t *)proc);
    TRY(rlimits(json_object_get(proc, "rlimits"), &s->c, err));
    TRY(strv_from(json_object_get(proc, "args"), &s->argv, &n, "process.args", err));
    if (!n)
        return err_set(err, CORDON_E_USAGE, "config.json: process.args is empty");
    TRY(strv_from(json_object_get(proc, "env"), &s->env, &n, "process.env", err));
    const char *cwd = json_string_value(json_object_get(proc, "cwd"));
    if (cwd && cwd[0] != '/')
        return err_set(err, CORDON_E_USAGE, "config.json: process.cwd '%s' is not absolute", cwd);
    s->c.cwd = cwd ? cwd : "/";
    s->c.terminal = json_is_true(json_object_get(proc, "terminal"));
    const json_t *user = json_object_get(proc, "user");
    s->c.uid = (uid_t)json_integer_value(json_object_get(user, "uid"));
    s->c.gid = (gid_t)json_integer_value(json_object_get(user, "gid"));
    const json_t *umask = json_object_get(user, "umask");
    s->c.umask = json_is_integer(umask) ? (mode_t)(json_integer_value(umask) & 0777) : 022;
    if (json_object_get(user, "username"))
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "process.user.username: cordon takes "
                       "numeric ids only");
    const json_t *groups = json_object_get(user, "additionalGids");
    s->c.n_groups = 0;
    for (size_t i = 0; i < json_array_size(groups); i++) {
        if (s->c.n_groups == sizeof s->c.groups / sizeof s->c.groups[0])
            return err_set(err, CORDON_E_UNSUPPORTED,
                           "process.user.additionalGids: more than "
                           "%zu",
                           sizeof s->c.groups / sizeof s->c.groups[0]);
        s->c.groups[s->c.n_groups++] = (gid_t)json_integer_value(json_array_get(groups, i));
    }
    uint64_t bounding = 0;
    const json_t *caps = json_object_get(proc, "capabilities");
    oci_caps_parse(json_object_get(caps, "bounding"), &bounding);
    /* cordon grants no capability (DESIGN: no capabilities); the spec's are
     * intersected with that, and said so once. */
    s->c.caps = 0;
    if (bounding)
        oci_log("info",
                "capabilities: the spec's %d are not granted: cordon runs a "
                "container with none",
                __builtin_popcountll(bounding));
    if (json_object_get(proc, "apparmorProfile") || json_object_get(proc, "selinuxLabel"))
        oci_log("warning",
                "process: apparmorProfile and selinuxLabel are not applied (cordon "
                "confines with its own seccomp and Landlock)");
    TRY(add_home(s, err));
    if (json_object_get(proc, "oomScoreAdj")) {
        s->c.set_oom_score_adj = true;
        s->c.oom_score_adj = (int)json_integer_value(json_object_get(proc, "oomScoreAdj"));
    }
    return 0;
}

static int namespaces(struct oci_spec *s, struct cordon_err *err)
{
    static const char *const joinable[CONTAINER_NS_COUNT] = { "network", "ipc", "uts" };
    bool seen[4] = { false }; /* pid, mount, network, ... */
    const json_t *list = json_object_get(json_object_get(s->config, "linux"), "namespaces");
    size_t i;
    json_t *ns;
    json_array_foreach(list, i, ns)
    {
        const char *type = json_string_value(json_object_get(ns, "type"));
        const char *path = json_string_value(json_object_get(ns, "path"));
        if (!type)
            return err_set(err, CORDON_E_USAGE, "config.json: a namespace without a type");
        if (!strcmp(type, "pid") || !strcmp(type, "mount") || !strcmp(type, "user") ||
            !strcmp(type, "cgroup")) {
            if (path)
                return err_set(err, CORDON_E_UNSUPPORTED,
                               "namespace %s: cordon makes a new "
                               "one and cannot join '%s'",
                               type, path);
            seen[!strcmp(type, "pid") ? 0 : !strcmp(type, "mount") ? 1 : 3] = true;
            continue;
        }
        int k = 0;
        while (k < CONTAINER_NS_COUNT && strcmp(type, joinable[k]))
            k++;
        if (k == CONTAINER_NS_COUNT)
            return err_set(err, CORDON_E_UNSUPPORTED, "namespace '%s' is not one cordon knows",
                           type);
        if (k == CONTAINER_NS_NET)
            seen[2] = true;
        if (k == CONTAINER_NS_IPC)
            s->ipc_own = true;
        s->c.ns_path[k] = path && *path ? path : NULL;
    }
    if (!seen[2])
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "the spec shares the host's network "
                       "namespace: cordon's egress boundary needs one of the container's own");
    if (!seen[0] || !seen[1])
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "the spec shares the host's %s namespace: "
                       "cordon gives every container its own",
                       !seen[0] ? "pid" : "mount");
    return 0;
}

/*
 * A sysctl of a namespace the container has of its own (net.*, IPC's kernel.shm*,
 * msg*, sem, fs.mqueue.*); any other would reach the host's, and is refused. (Ping
 * sockets that ping_group_range allows are refused by the egress lock where the
 * namespace is not cordon's own.)
 */
static int sysctls(struct oci_spec *s, const json_t *obj, struct cordon_err *err)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        bool net = !strncmp(key, "net.", 4);
        bool ipc = !strncmp(key, "kernel.shm", 10) || !strncmp(key, "kernel.msg", 10) ||
            !strcmp(key, "kernel.sem") || !strncmp(key, "fs.mqueue.", 10);
        if ((!net && !ipc) || strstr(key, "..") || strchr(key, '/') || !json_is_string(v))
            return err_set(err, CORDON_E_UNSUPPORTED,
                           "linux.sysctl: '%s' is not one of a "
                           "namespace the container has of its own",
                           key);
        if (ipc && !s->ipc_own)
            return err_set(err, CORDON_E_UNSUPPORTED,
                           "linux.sysctl: '%s' belongs to an IPC "
                           "namespace the spec does not give the container",
                           key);
        if ((net && s->c.ns_path[CONTAINER_NS_NET]) || (ipc && s->c.ns_path[CONTAINER_NS_IPC]))
            return err_set(err, CORDON_E_UNSUPPORTED,
                           "linux.sysctl: '%s' would change a "
                           "namespace the container joins, not its own",
                           key);
        if (s->c.n_sysctl == sizeof s->c.sysctl / sizeof s->c.sysctl[0])
            return err_set(err, CORDON_E_UNSUPPORTED, "linux.sysctl: too many");
        s->c.sysctl[s->c.n_sysctl][0] = key;
        s->c.sysctl[s->c.n_sysctl++][1] = json_string_value(v);
    }
    return 0;
}

/* Hooks cordon runs (createRuntime, prestart at create; poststart; poststop); the two that
 * would run inside the container, in its namespaces before the command, are refused. */
static int hooks(const struct oci_spec *s, struct cordon_err *err)
{
    const json_t *h = json_object_get(s->config, "hooks");
    static const char *const inside[] = { "createContainer", "startContainer" };
    for (size_t i = 0; i < 2; i++)
        if (json_array_size(json_object_get(h, inside[i])))
            return err_set(err, CORDON_E_UNSUPPORTED,
                           "hooks.%s: cordon runs no hook inside "
                           "the container",
                           inside[i]);
    return 0;
}

static int linux_section(struct oci_spec *s, struct cordon_err *err)
{
    const json_t *lx = json_object_get(s->config, "linux");
    static const char *const refused[] = { "personality", "intelRdt", "timeOffsets" };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const json_t *v = json_object_get(lx, refused[i]);
        if (v && !(json_is_object(v) && json_object_size(v) == 0))
            return err_set(err, CORDON_E_UNSUPPORTED, "linux.%s is not something cordon sets",
                           refused[i]);
    }
    TRY(sysctls(s, json_object_get(lx, "sysctl"), err));
    /* Devices: the harmless six are bound; any other would be a hole in the boundary. */
    static const char *const harmless[] = { "/dev/null",   "/dev/zero",    "/dev/full",
                                            "/dev/random", "/dev/urandom", "/dev/tty" };
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(lx, "devices"), i, d)
    {
        const char *path = json_string_value(json_object_get(d, "path"));
        bool ok = false;
        for (size_t k = 0; path && k < sizeof harmless / sizeof harmless[0]; k++)
            ok |= strcmp(path, harmless[k]) == 0;
        if (!ok)
            return err_set(err, CORDON_E_UNSUPPORTED,
                           "linux.devices: '%s' is not a device "
                           "cordon lets into a container",
                           path ? path : "?");
    }
    size_t n;
    TRY(strv_from(json_object_get(lx, "maskedPaths"), &s->c.masked, &s->c.n_masked,
                  "linux.maskedPaths", err));
    TRY(strv_from(json_object_get(lx, "readonlyPaths"), &s->c.readonly, &s->c.n_readonly,
                  "linux.readonlyPaths", err));
    (void)n;
    TRY(oci_seccomp_compile(json_object_get(lx, "seccomp"), &s->c.filter, err));
    const char *cg = json_string_value(json_object_get(lx, "cgroupsPath"));
    if (cg && strchr(cg, ':')) {
        /* systemd's slice:prefix:name: cordon makes the plain path it names. */
        char a[1024], b[1024], c[1024];
        if (sscanf(cg, "%1023[^:]:%1023[^:]:%1023s", a, b, c) != 3)
            return err_set(err, CORDON_E_USAGE, "linux.cgroupsPath '%s' is not slice:prefix:name",
                           cg);
        snprintf(s->cgroup, sizeof s->cgroup, "/%s/%s-%s.scope", a, b, c);
    } else if (cg && *cg) {
        snprintf(s->cgroup, sizeof s->cgroup, "%s%s", cg[0] == '/' ? "" : "/", cg);
    } else {
        snprintf(s->cgroup, sizeof s->cgroup, "/cordon-oci/%s", s->c.id);
    }
    if (strstr(s->cgroup, "/../") || strstr(s->cgroup, "/.."))
        return err_set(err, CORDON_E_USAGE, "linux.cgroupsPath '%s' climbs out", cg);
    const json_t *res = json_object_get(lx, "resources");
    json_int_t mem = json_integer_value(json_object_get(json_object_get(res, "memory"), "limit"));
    json_int_t pids = json_integer_value(json_object_get(json_object_get(res, "pids"), "limit"));
    const json_t *cpu = json_object_get(res, "cpu");
    s->memory = mem > 0 ? (uint64_t)mem : 0;
    s->pids = pids > 0 ? (uint64_t)pids : 0;
    s->cpu_quota = json_integer_value(json_object_get(cpu, "quota"));
    s->cpu_period = (uint64_t)json_integer_value(json_object_get(cpu, "period"));
    s->cpu_shares = (uint64_t)json_integer_value(json_object_get(cpu, "shares"));
    return 0;
}

/* The stricter of the spec's limit and the policy's: a written policy limit is a ceiling. */
static void merge_limits(struct oci_spec *s)
{
    struct policy_limits *l = &s->policy->limits;
    if (s->memory &&
        (!l->memory || (l->defaulted & (1u << POLICY_LIMIT_MEMORY)) || s->memory < l->memory))
        l->memory = s->memory;
    if (s->pids && (!l->pids || (l->defaulted & (1u << POLICY_LIMIT_PIDS)) || s->pids < l->pids))
        l->pids = s->pids;
}

static int rlimits(const json_t *list, struct sandbox_container *c, struct cordon_err *err)
{
    static const struct {
        const char *name;
        int resource;
    } table[] = {
        { "RLIMIT_NOFILE", RLIMIT_NOFILE },
        { "RLIMIT_NPROC", RLIMIT_NPROC },
        { "RLIMIT_CORE", RLIMIT_CORE },
        { "RLIMIT_FSIZE", RLIMIT_FSIZE },
        { "RLIMIT_STACK", RLIMIT_STACK },
        { "RLIMIT_MEMLOCK", RLIMIT_MEMLOCK },
        { "RLIMIT_AS", RLIMIT_AS },
        { "RLIMIT_CPU", RLIMIT_CPU },
        { "RLIMIT_DATA", RLIMIT_DATA },
        { "RLIMIT_NICE", RLIMIT_NICE },
        { "RLIMIT_RTPRIO", RLIMIT_RTPRIO },
        { "RLIMIT_SIGPENDING", RLIMIT_SIGPENDING },
        { "RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE },
        { "RLIMIT_LOCKS", RLIMIT_LOCKS },
        { "RLIMIT_RSS", RLIMIT_RSS },
        { "RLIMIT_RTTIME", RLIMIT_RTTIME },
    };
    size_t i;
    json_t *r;
    json_array_foreach(list, i, r)
    {
        const char *type = json_string_value(json_object_get(r, "type"));
        size_t k = 0;
        while (type && k < sizeof table / sizeof table[0] && strcmp(type, table[k].name))
            k++;
        if (!type || k == sizeof table / sizeof table[0])
            return err_set(err, CORDON_E_USAGE, "process.rlimits: unknown type '%s'",
                           type ? type : "?");
        if (c->n_rlimits == CONFINE_MAX_RLIMITS)
            return err_set(err, CORDON_E_UNSUPPORTED, "process.rlimits: more than %d",
                           CONFINE_MAX_RLIMITS);
        json_int_t soft = json_integer_value(json_object_get(r, "soft"));
        json_int_t hard = json_integer_value(json_object_get(r, "hard"));
        c->rlimits[c->n_rlimits++] =
            (struct rlimit_step){ table[k].resource,
                                  { .rlim_cur = soft < 0 ? RLIM_INFINITY : (rlim_t)soft,
                                    .rlim_max = hard < 0 ? RLIM_INFINITY : (rlim_t)hard } };
    }
    return 0;
}

int oci_spec_load(const char *bundle, const char *config, const char *id, struct oci_spec *s,
                  struct cordon_err *err)
{
    memset(s, 0, sizeof *s);
    if (!realpath(bundle, s->bundle))
        return err_sys(err, CORDON_E_USAGE, "bundle '%s'", bundle);
    char path[4200];
    if (config) {
        snprintf(path, sizeof path, "%s", config);
        snprintf(s->config_path, sizeof s->config_path, "%s", config);
    } else
        snprintf(path, sizeof path, "%s/config.json", s->bundle);
    json_error_t je;
    s->config = json_parse_strict_file(path, 0, &je);
    if (!s->config)
        return err_set(err, CORDON_E_USAGE, "%s:%d: %s", path, je.line, je.text);
    s->c.id = id;
    const json_t *root = json_object_get(s->config, "root");
    const char *rp = json_string_value(json_object_get(root, "path"));
    if (!rp)
        return err_set(err, CORDON_E_USAGE, "config.json: no root.path");
    _cleanup_free_ char *joined = dup_path(s->bundle, rp);
    if (!joined || !realpath(joined, s->root))
        return err_sys(err, CORDON_E_USAGE, "root.path '%s'", rp);
    s->c.root = s->root;
    s->c.root_readonly = json_is_true(json_object_get(root, "readonly"));
    s->c.hostname = json_string_value(json_object_get(s->config, "hostname"));
    TRY(choose_policy(s, err));
    TRY(oci_spec_process(json_object_get(s->config, "process"), s, err));
    TRY(namespaces(s, err));
    TRY(mounts(s, err));
    TRY(linux_section(s, err));
    TRY(hooks(s, err));
    merge_limits(s);
    s->c.cgroup = s->cgroup;
    s->c.cgroup_optional =
        !oci_host_root() && !s->memory && !s->pids && !s->cpu_quota && !s->cpu_shares;
    s->c.hidden[0] = s->policy->audit.file;
    s->c.hidden[1] = s->policy->audit.sign_key;
    return 0;
}

void oci_spec_release(struct oci_spec *s)
{
    container_release(&s->c);
    strv_free(s->argv);
    strv_free(s->env);
    s->argv = s->env = NULL;
    policy_free(s->policy);
    s->policy = NULL;
    json_decref(s->config);
    json_decref(s->process);
    s->config = s->process = NULL;
}
