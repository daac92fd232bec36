/*
 * lib/cordon.c: libcordon, the public API (include/cordon.h) over the core's
 * run path. Only what cordon.h declares is exported; the library's own
 * types and the core's stay hidden behind opaque handles.
 */
#include "../../include/cordon.h"

#include "common/err.h"
#include "core/run.h"

#include <stdlib.h>
#include <string.h>

struct cordon_policy {
    struct policy *p;
    bool finalized; /* cross-field checks run before the first run */
};

struct cordon_run {
    struct run *run;
};

struct cordon_result {
    struct sandbox_result res;
    const struct policy *p;
};

/* The two error records are the same shape; the public one is kept apart so
 * the header needs nothing of ours. */
_Static_assert((int)CORDON_ERROR_INTERNAL == (int)CORDON_E_INTERNAL, "error kinds differ");
_Static_assert(sizeof((struct cordon_error *)0)->message == sizeof((struct cordon_err *)0)->msg,
               "error message sizes differ");

static void export_err(struct cordon_error *out, const struct cordon_err *in)
{
    if (!out)
        return;
    out->kind = (enum cordon_error_kind)in->kind;
    out->errnum = in->errnum;
    memcpy(out->message, in->msg, sizeof out->message);
}

static struct cordon_policy *wrap_policy(struct policy *p, const struct cordon_err *e,
                                         struct cordon_error *err)
{
    if (!p) {
        export_err(err, e);
        return NULL;
    }
    struct cordon_policy *cp = calloc(1, sizeof *cp);
    if (!cp) {
        policy_free(p);
        struct cordon_err oom = { 0 };
        err_set(&oom, CORDON_E_INTERNAL, "out of memory");
        export_err(err, &oom);
        return NULL;
    }
    cp->p = p;
    return cp;
}

CORDON_API struct cordon_policy *cordon_policy_new(struct cordon_error *err)
{
    struct cordon_err e = { 0 };
    return wrap_policy(policy_new(&e), &e, err);
}

CORDON_API struct cordon_policy *cordon_policy_load(const char *path, struct cordon_error *err)
{
    struct cordon_err e = { 0 };
    return wrap_policy(policy_load(path, &e), &e, err);
}

CORDON_API struct cordon_policy *cordon_policy_from_json(const char *text, size_t len,
                                                         struct cordon_error *err)
{
    struct cordon_err e = { 0 };
    return wrap_policy(policy_load_string(text, len, "policy.json", &e), &e, err);
}

static int failed(struct cordon_error *err, const struct cordon_err *e)
{
    export_err(err, e);
    return -1;
}

static int not_after_prepare(struct cordon_policy *p, struct cordon_error *err)
{
    struct cordon_err e = { 0 };
    if (p->finalized)
        return failed(err,
                      (err_set(&e, CORDON_E_USAGE,
                               "the policy is in use by a run; "
                               "change it before the first cordon_prepare()"),
                       &e));
    return 0;
}

CORDON_API int cordon_policy_set(struct cordon_policy *p, const char *key, const char *value,
                                 struct cordon_error *err)
{
    struct cordon_err e = { 0 };
    if (not_after_prepare(p, err) < 0)
        return -1;
    return policy_set(p->p, key, value, key, &e) < 0 ? failed(err, &e) : 0;
}

CORDON_API int cordon_policy_add_bind(struct cordon_policy *p, const char *spec, int writable,
                                      struct cordon_error *err)
{
    struct cordon_err e = { 0 };
    if (not_after_prepare(p, err) < 0)
        return -1;
    return policy_add_bind(p->p, spec, writable != 0, writable ? "read_write" : "read_only", &e) < 0
        ? failed(err, &e)
        : 0;
}

static int finalize(struct cordon_policy *p, struct cordon_error *err)
{
    struct cordon_err e = { 0 };
    /* As cordon run: with keys in the trust directory only a signed policy runs. */
    if (!p->finalized && (policy_finalize(p->p, &e) < 0 || policy_require_trusted(p->p, &e) < 0))
        return failed(err, &e);
    p->finalized = true;
    return 0;
}

CORDON_API char *cordon_policy_to_json(struct cordon_policy *p, struct cordon_error *err)
{
    if (finalize(p, err) < 0)
        return NULL;
    json_t *j = policy_to_json(p->p);
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    return text;
}

CORDON_API void cordon_policy_free(struct cordon_policy *p)
{
    if (!p)
        return;
    policy_free(p->p);
    free(p);
}

CORDON_API int cordon_prepare(struct cordon_policy *p, struct cordon_run **out,
                              struct cordon_error *err)
{
    struct cordon_err e = { 0 };
    *out = NULL;
    if (finalize(p, err) < 0)
        return -1;
    struct cordon_run *r = calloc(1, sizeof *r);
    if (!r)
        return failed(err, (err_set(&e, CORDON_E_INTERNAL, "out of memory"), &e));
    if (run_prepare(p->p, NULL, &r->run, &e) < 0) {
        free(r);
        return failed(err, &e);
    }
    *out = r;
    return 0;
}

CORDON_API int cordon_start(struct cordon_run *run, const struct cordon_call *call,
                            struct cordon_error *err)
{
    struct cordon_err e = { 0 };
    struct sandbox_call c = {
        .argv = (char *const *)call->argv,
        .in_fd = call->stdin_fd,
        .out_fd = call->stdout_fd,
        .err_fd = call->stderr_fd,
        .sig_fd = call->signal_fd,
    };
    return run_start(run->run, &c, &e) < 0 ? failed(err, &e) : 0;
}

CORDON_API int cordon_wait(struct cordon_run *run, struct cordon_result **out,
                           struct cordon_error *err)
{
    struct cordon_err e = { 0 };
    *out = NULL;
    struct cordon_result *res = calloc(1, sizeof *res);
    if (!res)
        return failed(err, (err_set(&e, CORDON_E_INTERNAL, "out of memory"), &e));
    if (run_wait(run->run, &res->res, &e) < 0) {
        free(res);
        return failed(err, &e);
    }
    res->p = run_policy(run->run);
    *out = res;
    return 0;
}

CORDON_API void cordon_release(struct cordon_run *run)
{
    if (!run)
        return;
    run_release(run->run);
    free(run);
}

CORDON_API const char *cordon_run_id(const struct cordon_run *run)
{
    return run_get_id(run->run);
}

CORDON_API int cordon_result_exit_code(const struct cordon_result *res)
{
    return res->res.signaled || res->res.reason == RUN_SETUP_ERROR ? -1 : res->res.exit_code;
}

CORDON_API int cordon_result_signal(const struct cordon_result *res)
{
    return res->res.signaled ? res->res.signal : 0;
}

CORDON_API const char *cordon_result_reason(const struct cordon_result *res)
{
    return run_reason_name(res->res.reason);
}

CORDON_API int cordon_result_status(const struct cordon_result *res)
{
    return res->res.status;
}

CORDON_API double cordon_result_wall_ms(const struct cordon_result *res)
{
    return (double)res->res.wall_us / 1000.0;
}

CORDON_API char *cordon_result_to_json(const struct cordon_result *res)
{
    json_t *j = sandbox_result_to_json(&res->res, res->p);
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    return text;
}

CORDON_API void cordon_result_free(struct cordon_result *res)
{
    free(res);
}
