/*
 * oci/gvisor.c: the gvisor level under an engine, delegated to runsc, which
 * speaks runc's command line itself. cordon-oci keeps the container's state
 * (that it is runsc's, and runsc's root beside it) and wraps the bundle with
 * the policy where runsc can hold it: a copy of config.json with the
 * stricter memory and pids limits, and runsc's flags as cordon's gvisor
 * level sets them (ptrace platform, no network). What runsc cannot hold
 * (cordon's gateway: runsc gets no door here) refuses the container.
 */
#include "oci/oci.h"

#include "common/cleanup.h"
#include "sandbox/gvisor/gvisor.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

bool oci_gvisor_delegated(const struct oci_state *st)
{
    const char *d = oci_state_str(st, "delegate");
    return d && !strcmp(d, "runsc");
}

/* runsc and its global flags, then ARGV (a command and its arguments); NULL-terminated. */
static char **runsc_argv(const struct oci_state *st, int argc, char **argv, char *runsc, char *root)
{
    char **out = calloc((size_t)argc + 10, sizeof *out);
    size_t n = 0;
    if (!out)
        return NULL;
    out[n++] = runsc;
    out[n++] = root;
    out[n++] = "--platform=ptrace";
    out[n++] = "--network=none";
    if (oci_opts.log) {
        out[n++] = "--log";
        out[n++] = (char *)oci_opts.log;
        out[n++] = oci_opts.log_json ? "--log-format=json" : "--log-format=text";
    }
    (void)st;
    for (int i = 0; i < argc; i++)
        out[n++] = argv[i];
    return out;
}

/* Run runsc with ARGV's command; its exit status, or -1 with ERR when it could not start. */
static int run_runsc(const struct oci_state *st, int argc, char **argv, struct cordon_err *err)
{
    char runsc[PATH_MAX], root[PATH_MAX + 16];
    TRY(gvisor_find_runsc(runsc, sizeof runsc, err));
    snprintf(root, sizeof root, "--root=%s/runsc", st->dir);
    _cleanup_free_ char **args = runsc_argv(st, argc, argv, runsc, root);
    if (!args)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execv(runsc, args);
        _exit(127);
    }
    int ws = 0;
    if (pid < 0 || waitpid(pid, &ws, 0) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot run '%s'", runsc);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

int oci_gvisor_forward(struct oci_state *st, int argc, char **argv)
{
    struct cordon_err err = { 0 };
    bool delete = !strcmp(argv[0], "delete");
    int rc = run_runsc(st, argc, argv, &err);
    if (rc < 0)
        return oci_fail(&err);
    if (delete &&rc == 0)
        oci_state_remove(st);
    return rc;
}

/* The bundle runsc runs: config.json with the policy's stricter limits, the root absolute. */
static int wrap_bundle(const struct oci_spec *spec, const struct oci_state *st, char *bundle,
                       size_t size, struct cordon_err *err)
{
    json_auto_t *c = json_deep_copy(spec->config);
    json_t *root = json_object_get(c, "root");
    json_object_set_new(root, "path", json_string(spec->root));
    json_t *lx = json_object_get(c, "linux");
    if (!lx)
        json_object_set_new(c, "linux", lx = json_object());
    json_t *res = json_object_get(lx, "resources");
    if (!res)
        json_object_set_new(lx, "resources", res = json_object());
    const struct policy_limits *l = &spec->policy->limits;
    if (l->memory)
        json_object_set_new(res, "memory", json_pack("{s:I}", "limit", (json_int_t)l->memory));
    if (l->pids)
        json_object_set_new(res, "pids", json_pack("{s:I}", "limit", (json_int_t)l->pids));
    char path[PATH_MAX + 16];
    if (snprintf(bundle, size, "%s/bundle", st->dir) >= (int)size ||
        snprintf(path, sizeof path, "%s/config.json", bundle) >= (int)sizeof path)
        return err_set(err, CORDON_E_USAGE, "state directory '%s' is too long", st->dir);
    if (mkdir(bundle, 0700) < 0 || json_dump_file(c, path, JSON_COMPACT) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot write the bundle for runsc in '%s'", bundle);
    return 0;
}

int oci_gvisor_create(struct oci_spec *spec, struct oci_state *st, const char *pid_file,
                      const char *console, struct cordon_err *err)
{
    if (spec->policy->network.mode == POLICY_NET_GATEWAY)
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "the gvisor level under an engine runs "
                       "runsc without cordon's gateway (--network=none): a policy with "
                       "network.allow needs the namespace or process level");
    char bundle[PATH_MAX];
    TRY(wrap_bundle(spec, st, bundle, sizeof bundle, err));
    json_object_set_new(st->doc, "delegate", json_string("runsc"));
    json_object_set_new(st->doc, "level", json_string("gvisor"));
    json_object_set_new(st->doc, "bundle", json_string(spec->bundle));
    json_object_set_new(st->doc, "policy_digest",
                        json_string(policy_evidence(spec->policy)->policy));
    TRY(oci_state_save(st, err));
    char *argv[12];
    int n = 0;
    char b[PATH_MAX + 16], p[PATH_MAX + 16], s[PATH_MAX + 32];
    snprintf(b, sizeof b, "--bundle=%s", bundle);
    argv[n++] = "create";
    argv[n++] = b;
    if (pid_file) {
        snprintf(p, sizeof p, "--pid-file=%s", pid_file);
        argv[n++] = p;
    }
    if (console) {
        snprintf(s, sizeof s, "--console-socket=%s", console);
        argv[n++] = s;
    }
    argv[n++] = (char *)spec->c.id;
    argv[n] = NULL;
    int rc = run_runsc(st, n, argv, err);
    if (rc > 0)
        return err_set(err, CORDON_E_SETUP,
                       "runsc create failed (status %d; its log says "
                       "why)",
                       rc);
    return rc;
}
