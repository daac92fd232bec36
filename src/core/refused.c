/*
 * core/refused.c: the record of a run that was refused before it started
 * (a policy whose signature does not hold, a flag that would relax a signed
 * policy, a refused break-glass, a level that cannot run here): one
 * run.refused event, so the log shows the attempt as well as the runs.
 * Runs in the CLI, the daemon or the supervisor; best effort, since the
 * refusal itself is what the caller reports.
 */
#include "core/run.h"

#include "audit/audit.h"

#include <unistd.h>

/* Everything known of the attempt; P may be a policy that was never finished. */
static json_t *refused_fields(const struct policy *p, bool effective, char *const *argv,
                              const char *front_end, const struct cordon_err *why)
{
    json_t *f = json_pack("{s:s, s:s, s:i}", "reason", why->msg, "front_end", front_end, "uid",
                          (int)getuid());
    if (!f)
        return NULL;
    if (argv) {
        json_t *a = json_array();
        for (char *const *s = argv; a && *s; s++)
            json_array_append_new(a, json_string(*s));
        json_object_set_new(f, "argv", a);
    }
    if (!p)
        return f;
    if (p->origin)
        json_object_set_new(f, "policy_file", json_string(p->origin));
    if (p->loaded)
        json_object_set_new(f, "policy_file_digest", json_string(policy_evidence(p)->file));
    if (p->signer[0])
        json_object_set_new(f, "policy_signer", json_string(p->signer));
    if (effective) {
        json_object_set_new(f, "policy_digest", json_string(policy_evidence(p)->policy));
        json_object_set_new(f, "level", json_string(cordon_level_name(p->level)));
    }
    if (p->flags)
        json_object_set(f, "policy_flags", p->flags);
    return f;
}

void run_record_refused(const struct policy *p, bool effective, const char *log_path,
                        const char *run_id, char *const *argv, const char *front_end,
                        const struct cordon_err *why)
{
    struct cordon_err ignored = { 0 };
    struct audit_log *log = NULL;
    /* A log the sandbox could have written is no record (and the refusal may
     * be of that very placement): nothing is written there. */
    if (p &&
        (!policy_outside_writable(p, p->audit.file) ||
         !policy_outside_writable(p, p->audit.witness) ||
         !policy_outside_writable(p, p->audit.sign_key) || !policy_outside_writable(p, log_path)))
        return;
    /* The policy's log first: a refused --audit must not take the record elsewhere. */
    if (p && p->audit.file) {
        if (cordon_audit_open(p, &log, &ignored) < 0)
            return;
    } else if (log_path) {
        struct audit_options o = { .path = log_path };
        log = audit_open(&o, &ignored);
    }
    if (!log)
        return;
    audit_append(log, "run.refused", run_id, refused_fields(p, effective, argv, front_end, why),
                 &ignored);
    audit_close(log, &ignored);
    audit_free(log);
}
