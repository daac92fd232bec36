/*
 * oci/seccomp.c: a spec's linux.seccomp as a filter of its own. It is
 * installed just before cordon's allowlist (sandbox/confine.c), and the
 * kernel runs both: a call passes only where both let it, so the stricter
 * answer wins and nothing in a spec can make cordon's filter weaker.
 */
#include "oci/oci.h"

#include "common/cleanup.h"

#include <errno.h>
#include <seccomp.h>
#include <string.h>

static void ctx_release(scmp_filter_ctx *ctx)
{
    if (*ctx)
        seccomp_release(*ctx);
}

static int action(const char *name, const json_t *errno_ret, uint32_t default_errno, uint32_t *out,
                  struct cordon_err *err)
{
    uint32_t e =
        json_is_integer(errno_ret) ? (uint32_t)json_integer_value(errno_ret) : default_errno;
    if (!name)
        return err_set(err, CORDON_E_USAGE, "linux.seccomp: an action is missing");
    if (!strcmp(name, "SCMP_ACT_ALLOW"))
        *out = SCMP_ACT_ALLOW;
    else if (!strcmp(name, "SCMP_ACT_ERRNO"))
        *out = SCMP_ACT_ERRNO(e);
    else if (!strcmp(name, "SCMP_ACT_KILL") || !strcmp(name, "SCMP_ACT_KILL_THREAD"))
        *out = SCMP_ACT_KILL_THREAD;
    else if (!strcmp(name, "SCMP_ACT_KILL_PROCESS"))
        *out = SCMP_ACT_KILL_PROCESS;
    else if (!strcmp(name, "SCMP_ACT_TRAP"))
        *out = SCMP_ACT_TRAP;
    else if (!strcmp(name, "SCMP_ACT_LOG"))
        *out = SCMP_ACT_LOG;
    else if (!strcmp(name, "SCMP_ACT_TRACE"))
        *out = SCMP_ACT_TRACE(e);
    else
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "linux.seccomp: action '%s' is not one "
                       "cordon installs",
                       name);
    return 0;
}

static int operator(const char *op, enum scmp_compare *out, struct cordon_err *err)
{
    static const struct {
        const char *name;
        enum scmp_compare op;
    } ops[] = {
        { "SCMP_CMP_NE", SCMP_CMP_NE },
        { "SCMP_CMP_LT", SCMP_CMP_LT },
        { "SCMP_CMP_LE", SCMP_CMP_LE },
        { "SCMP_CMP_EQ", SCMP_CMP_EQ },
        { "SCMP_CMP_GE", SCMP_CMP_GE },
        { "SCMP_CMP_GT", SCMP_CMP_GT },
        { "SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ },
    };
    for (size_t i = 0; op && i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(op, ops[i].name)) {
            *out = ops[i].op;
            return 0;
        }
    return err_set(err, CORDON_E_USAGE, "linux.seccomp: unknown operator '%s'", op ? op : "");
}

static int add_rule(scmp_filter_ctx ctx, const json_t *rule, uint32_t default_errno,
                    uint32_t default_action, struct cordon_err *err)
{
    uint32_t act;
    TRY(action(json_string_value(json_object_get(rule, "action")),
               json_object_get(rule, "errnoRet"), default_errno, &act, err));
    if (act == default_action)
        return 0; /* libseccomp refuses a rule that says what the default says */
    const json_t *args = json_object_get(rule, "args");
    struct scmp_arg_cmp cmp[6];
    size_t n = 0, i;
    json_t *a;
    json_array_foreach(args, i, a)
    {
        if (n == 6)
            return err_set(err, CORDON_E_USAGE, "linux.seccomp: more than 6 arguments");
        enum scmp_compare op = SCMP_CMP_EQ;
        TRY(operator(json_string_value(json_object_get(a, "op")), &op, err));
        cmp[n++] = (struct scmp_arg_cmp){
            .arg = (unsigned)json_integer_value(json_object_get(a, "index")),
            .op = op,
            .datum_a = (scmp_datum_t)json_integer_value(json_object_get(a, "value")),
            .datum_b = (scmp_datum_t)json_integer_value(json_object_get(a, "valueTwo")),
        };
    }
    json_t *name;
    json_array_foreach(json_object_get(rule, "names"), i, name)
    {
        /* A name this libseccomp or kernel does not know is no call to filter. */
        int nr = seccomp_syscall_resolve_name(json_string_value(name) ?: "");
        if (nr == __NR_SCMP_ERROR)
            continue;
        int rc = seccomp_rule_add_array(ctx, act, nr, (unsigned)n, cmp);
        if (rc < 0 && rc != -EEXIST) {
            errno = -rc;
            return err_sys(err, CORDON_E_USAGE, "linux.seccomp: cannot add a rule for '%s'",
                           json_string_value(name));
        }
    }
    return 0;
}

int oci_seccomp_compile(const json_t *sc, struct seccomp_program *out, struct cordon_err *err)
{
    *out = (struct seccomp_program){ 0 };
    if (!sc || json_is_null(sc))
        return 0;
    if (json_object_get(sc, "listenerPath") || json_array_size(json_object_get(sc, "flags")))
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "linux.seccomp: listenerPath and flags are "
                       "not something cordon installs");
    const json_t *def_errno = json_object_get(sc, "defaultErrnoRet");
    uint32_t errno_default =
        json_is_integer(def_errno) ? (uint32_t)json_integer_value(def_errno) : EPERM;
    uint32_t def;
    TRY(action(json_string_value(json_object_get(sc, "defaultAction")), def_errno, EPERM, &def,
               err));
    _cleanup_(ctx_release) scmp_filter_ctx ctx = seccomp_init(def);
    if (!ctx)
        return err_set(err, CORDON_E_SETUP, "linux.seccomp: cannot start a filter");
    /* No new privileges is cordon's own; the filter must not need it off. */
    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
    size_t i;
    json_t *rule;
    json_array_foreach(json_object_get(sc, "syscalls"), i, rule)
        TRY(add_rule(ctx, rule, errno_default, def, err));
    return seccomp_program_export(ctx, out, err);
}
