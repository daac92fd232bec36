/*
 * cordon.h: run a command inside a cordon sandbox from C or C++.
 *
 * A policy says what a run may touch (files, network, credentials, limits,
 * isolation level). A run is prepared from the policy alone: the boundary is
 * built and waits. Starting it hands in the command and its stdio; waiting
 * supervises it to the end and gives the result; releasing tears down what
 * is left, whatever state the run is in.
 *
 *     struct cordon_error err;
 *     struct cordon_policy *p = cordon_policy_load("policy.yaml", &err);
 *     struct cordon_run *run = NULL;
 *     struct cordon_result *res = NULL;
 *     const char *argv[] = { "python3", "-c", "print(1+1)", NULL };
 *     struct cordon_call call = { argv, -1, 1, 2, -1 };
 *     if (p && cordon_prepare(p, &run, &err) == 0 && cordon_start(run, &call, &err) == 0 &&
 *         cordon_wait(run, &res, &err) == 0)
 *         printf("exit %d\n", cordon_result_exit_code(res));
 *     else
 *         fprintf(stderr, "cordon: %s\n", err.message);
 *     cordon_result_free(res);
 *     cordon_release(run);
 *     cordon_policy_free(p);
 *
 * Every call that can fail takes a struct cordon_error last and returns 0 (or
 * a pointer), or -1 (or NULL) with the error filled. Objects are owned by the
 * caller and freed with their own _free/_release call; a policy must outlive
 * the runs prepared from it. Runs are independent: several may be prepared,
 * started and waited on from one process, and nothing here changes
 * process-wide state (signal handlers or masks). Link with `pkg-config
 * --libs cordon`.
 */
#ifndef CORDON_H
#define CORDON_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CORDON_API __attribute__((visibility("default")))
#else
#define CORDON_API
#endif

enum cordon_error_kind {
    CORDON_ERROR_NONE = 0,
    CORDON_ERROR_USAGE,       /* a bad argument or key */
    CORDON_ERROR_POLICY,      /* a malformed or impossible policy */
    CORDON_ERROR_UNSUPPORTED, /* this host lacks what the policy needs */
    CORDON_ERROR_SETUP,       /* building the sandbox failed */
    CORDON_ERROR_NOEXEC,      /* the command is not executable */
    CORDON_ERROR_NOTFOUND,    /* the command was not found */
    CORDON_ERROR_INTERNAL,    /* a bug or resource exhaustion in cordon */
};

struct cordon_error {
    enum cordon_error_kind kind;
    int errnum;        /* errno, or 0 */
    char message[256]; /* one line, lower case, naming what failed */
};

struct cordon_policy;
struct cordon_run;
struct cordon_result;

/* The command and where its stdio goes; descriptors stay the caller's and
 * must stay open until cordon_wait() returns. */
struct cordon_call {
    const char *const *argv; /* NULL-terminated; argv[0] is searched in PATH inside */
    int stdin_fd;            /* relayed to the command's stdin; -1 for an empty one */
    int stdout_fd;           /* where its stdout is relayed */
    int stderr_fd;           /* where its stderr is relayed */
    int signal_fd;           /* a signalfd whose signals pass to the command, or -1 */
};

/* ---- policies ---- */

/* The defaults (namespace level, no network, safe limits). NULL on error. */
CORDON_API struct cordon_policy *cordon_policy_new(struct cordon_error *err);

/* Parse and validate a YAML or JSON policy file. NULL with ERR (file:line: key: why). */
CORDON_API struct cordon_policy *cordon_policy_load(const char *path, struct cordon_error *err);

/* The same from LEN bytes of JSON (or YAML) text. */
CORDON_API struct cordon_policy *cordon_policy_from_json(const char *text, size_t len,
                                                         struct cordon_error *err);

/*
 * Set one key as a command-line flag would: KEY is the policy path
 * ("limits.memory", "limits.wall", "filesystem.workspace", "network.allow",
 * "isolation", ...), VALUE its text; a list key gets VALUE added. Call
 * before the policy's first cordon_prepare(). A signed policy (its file's
 * require_signature, or keys in /etc/cordon/trust.d) may only be tightened:
 * a value that relaxes it (a larger limit, a new bind or allow, a weaker
 * level) fails with CORDON_ERROR_POLICY and leaves the policy as it was.
 */
CORDON_API int cordon_policy_set(struct cordon_policy *p, const char *key, const char *value,
                                 struct cordon_error *err);

/*
 * Bind host path SPEC ("PATH[:DEST]") read-only, or read-write when WRITABLE;
 * under a signature only a bind the policy has already.
 */
CORDON_API int cordon_policy_add_bind(struct cordon_policy *p, const char *spec, int writable,
                                      struct cordon_error *err);

/* The effective policy as JSON (caller frees with free()), or NULL. */
CORDON_API char *cordon_policy_to_json(struct cordon_policy *p, struct cordon_error *err);

CORDON_API void cordon_policy_free(struct cordon_policy *p);

/* ---- runs ---- */

/* Build the boundary for a run under P and leave it waiting. */
CORDON_API int cordon_prepare(struct cordon_policy *p, struct cordon_run **out,
                              struct cordon_error *err);

/* Hand CALL to a prepared run. A command that cannot exec is reported by cordon_wait(). */
CORDON_API int cordon_start(struct cordon_run *run, const struct cordon_call *call,
                            struct cordon_error *err);

/* Supervise a started run to its end; *OUT is the result (caller frees). */
CORDON_API int cordon_wait(struct cordon_run *run, struct cordon_result **out,
                           struct cordon_error *err);

/* Tear down what is left of RUN and free it; NULL is fine. A prepared run
 * that was never started leaves nothing behind. */
CORDON_API void cordon_release(struct cordon_run *run);

/* The run's id in the audit log (32 hex digits); valid until release. */
CORDON_API const char *cordon_run_id(const struct cordon_run *run);

/* ---- results ---- */

/* The command's exit code, or -1 when it was killed by a signal or never ran. */
CORDON_API int cordon_result_exit_code(const struct cordon_result *res);

/* The signal that killed it, or 0. */
CORDON_API int cordon_result_signal(const struct cordon_result *res);

/* Why it ended: "exited", "timeout", "oom", "pids_limit", "output_limit",
 * "cpu_limit", "file_size_limit", "killed" or "setup_error". */
CORDON_API const char *cordon_result_reason(const struct cordon_result *res);

/* cordon run's exit status for it: the code, 128+signal, 124 timeout, 125-127 setup,
 * 122 an overlay change not committed. */
CORDON_API int cordon_result_status(const struct cordon_result *res);

/* Wall-clock milliseconds from start to end. */
CORDON_API double cordon_result_wall_ms(const struct cordon_result *res);

/* The whole result as JSON (the --result form; caller frees with free()), or NULL. */
CORDON_API char *cordon_result_to_json(const struct cordon_result *res);

CORDON_API void cordon_result_free(struct cordon_result *res);

#ifdef __cplusplus
}
#endif

#endif /* CORDON_H */
