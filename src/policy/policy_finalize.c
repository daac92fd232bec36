/*
 * policy/policy_finalize.c: the checks across keys once every source (file,
 * flags) has been applied: host paths settled, the audit log and secrets out
 * of the sandbox's reach, the network mode secrets and rules imply, the
 * tools and governance sections' cross-checks. Runs in the CLI or
 * supervisor; touches the filesystem only to settle host paths.
 */
#include "policy/policy_int.h"

#include "common/hostpath.h"
#include "common/strv.h"
#include "common/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/*
 * A tree the sandbox sees (only those it can write: WRITABLE) on the file
 * system where FILE has more than one name: another of its names may lie
 * inside, and a hard link is found by nothing short of walking the tree.
 * NULL when there is none, or FILE has one name (*NLINK: how many).
 */
static const char *linked_into(const struct policy *p, const char *file, bool writable,
                               unsigned long *nlink)
{
    struct stat f, t;
    if (!file || stat(file, &f) < 0 || f.st_nlink < 2 || S_ISDIR(f.st_mode))
        return NULL;
    *nlink = (unsigned long)f.st_nlink;
    if (p->workspace && stat(p->workspace, &t) == 0 && t.st_dev == f.st_dev)
        return p->workspace;
    for (size_t i = 0; i < p->n_binds; i++)
        if ((p->binds[i].writable || !writable) && stat(p->binds[i].source, &t) == 0 &&
            t.st_dev == f.st_dev)
            return p->binds[i].source;
    return NULL;
}

/* The audit log and its key stay out of every tree the sandbox can write, by any name. */
static int check_outside_writable(const struct policy *p, const char *file, const char *what,
                                  const char *where, struct cordon_err *err)
{
    if (!file)
        return 0;
    unsigned long names = 0;
    const char *tree = linked_into(p, file, true, &names);
    if (tree)
        return err_set(err, CORDON_E_POLICY,
                       "%s%s: \"%s\" has %lu hard links, and one may lie inside \"%s\", which the "
                       "sandbox can write; keep it with one name",
                       where, what, file, names, tree);
    if (p->workspace && policy_inside_tree(file, p->workspace))
        return err_set(err, CORDON_E_POLICY,
                       "%s%s: \"%s\" is inside the workspace \"%s\", which the sandbox can "
                       "write; keep it outside",
                       where, what, file, p->workspace);
    for (size_t i = 0; i < p->n_binds; i++)
        if (p->binds[i].writable && policy_inside_tree(file, p->binds[i].source))
            return err_set(err, CORDON_E_POLICY,
                           "%s%s: \"%s\" is inside the writable bind \"%s\"; keep it outside",
                           where, what, file, p->binds[i].source);
    return 0;
}

bool policy_outside_writable(const struct policy *p, const char *file)
{
    struct cordon_err ignored;
    return check_outside_writable(p, file, "", "", &ignored) == 0;
}

/* A secret's file must not be readable inside: the value would enter the sandbox. */
static int check_secret_hidden(const struct policy *p, const struct policy_secret *sec,
                               const char *where, struct cordon_err *err)
{
    if (strncmp(sec->from, "file:", 5) != 0)
        return 0;
    const char *file = sec->from + 5;
    const char *tree = p->workspace && policy_inside_tree(file, p->workspace) ? p->workspace : NULL;
    for (size_t i = 0; !tree && i < p->n_binds; i++)
        if (policy_inside_tree(file, p->binds[i].source))
            tree = p->binds[i].source;
    if (tree)
        return err_set(err, CORDON_E_POLICY,
                       "%ssecrets: the file of \"%s\" (\"%s\") is inside \"%s\", which the "
                       "sandbox sees; the value would enter the sandbox",
                       where, sec->name, file, tree);
    unsigned long names = 0;
    if ((tree = linked_into(p, file, false, &names)))
        return err_set(err, CORDON_E_POLICY,
                       "%ssecrets: the file of \"%s\" (\"%s\") has %lu hard links, and one may "
                       "lie inside \"%s\", which the sandbox sees; keep it with one name",
                       where, sec->name, file, names, tree);
    return 0;
}

/* The audit log and its witness are never written through a link, nor kept where a run writes. */
static int settle_audit_files(struct policy *p, const char *where, struct cordon_err *err)
{
    if (p->audit.file)
        TRY(policy_settle_path(&p->audit.file, false, "audit.file", NULL, where, err));
    if (p->audit.witness)
        TRY(policy_settle_path(&p->audit.witness, false, "audit.witness", NULL, where, err));
    TRY(check_outside_writable(p, p->audit.file, "audit.file", where, err));
    TRY(check_outside_writable(p, p->audit.witness, "audit.witness", where, err));
    return check_outside_writable(p, p->audit.sign_key, "audit.sign_key", where, err);
}

/*
 * Host paths settled (see policy_settle_path()), and what the sandbox can
 * write kept apart from the audit log, its keys and the secrets' files.
 */
static int settle_fs(struct policy *p, const char *where, struct cordon_err *err)
{
    if (p->workspace)
        TRY(policy_settle_path(&p->workspace, p->workspace_follow_symlinks, "filesystem.workspace",
                               "filesystem.workspace_follow_symlinks: true allows it", where, err));
    for (size_t i = 0; i < p->n_binds; i++)
        TRY(policy_settle_path(&p->binds[i].source, p->binds[i].follow_symlinks,
                               p->binds[i].writable ? "filesystem.read_write"
                                                    : "filesystem.read_only",
                               "follow_symlinks: true on that bind allows it", where, err));
    if (p->workspace_mode == POLICY_WS_OVERLAY && !p->workspace)
        return err_set(err, CORDON_E_POLICY,
                       "%sworkspace.mode: overlay needs a host workspace "
                       "(filesystem.workspace or -w DIR)",
                       where);
    TRY(settle_audit_files(p, where, err));
    TRY(check_outside_writable(p, p->gov.require_signature, "require_signature", where, err));
    TRY(check_outside_writable(p, p->tools.pins, "tools.pins", where, err));
    for (size_t i = 0; i < p->n_secrets; i++)
        TRY(check_secret_hidden(p, &p->secrets[i], where, err));
    return 0;
}

/* The setters refuse these already; this catches a struct filled by hand. */
static int check_binds(const struct policy *p, const char *where, struct cordon_err *err)
{
    char why[200];
    for (size_t i = 0; i < p->n_binds; i++) {
        const char *dest = p->binds[i].dest;
        if (policy_check_dest(dest, why, sizeof why) < 0)
            return err_set(err, CORDON_E_POLICY, "%sfilesystem: %s", where, why);
        for (size_t j = i + 1; j < p->n_binds; j++)
            if (strcmp(dest, p->binds[j].dest) == 0)
                return err_set(err, CORDON_E_POLICY, "%sfilesystem: dest \"%s\" is bound twice",
                               where, dest);
        /* Its mountpoint would be made in the host directory, where a run may plant links. */
        for (size_t j = 0; j < p->n_binds; j++)
            if (j != i && p->binds[j].writable && hostpath_within(dest, p->binds[j].dest))
                return err_set(err, CORDON_E_POLICY,
                               "%sfilesystem: dest \"%s\" is inside the writable bind at \"%s\"; "
                               "bind it elsewhere",
                               where, dest, p->binds[j].dest);
    }
    return 0;
}

/* A name in two places that exclude each other, and audit keys with nothing to sign. */
static int check_exclusive(const struct policy *p, const char *where, struct cordon_err *err)
{
    for (size_t i = 0; i < p->n_syscalls_allow; i++)
        if (strv_contains(p->syscalls_deny, p->n_syscalls_deny, p->syscalls_allow[i]))
            return err_set(err, CORDON_E_POLICY, "%ssyscalls: \"%s\" is both allowed and denied",
                           where, p->syscalls_allow[i]);
    for (size_t i = 0; i < p->n_env_pass; i++)
        if (policy_env_set_find(p, p->env_pass[i]) >= 0)
            return err_set(err, CORDON_E_POLICY, "%senv: \"%s\" is both passed and set", where,
                           p->env_pass[i]);
    /* A key or a checkpoint rate with nothing to sign would be a silent no-op. */
    if (p->audit.sign_key && !p->audit.file)
        return err_set(err, CORDON_E_POLICY, "%saudit: sign_key is set but file is not", where);
    if (p->audit.witness && !p->audit.file)
        return err_set(err, CORDON_E_POLICY, "%saudit: witness is set but file is not", where);
    /* A witness beside the log is only a copy: who cuts one cuts the other. */
    if (p->audit.witness && !strcmp(p->audit.witness, p->audit.file))
        return err_set(err, CORDON_E_POLICY,
                       "%saudit: witness \"%s\" is the log itself; keep "
                       "it on another path, out of reach of whoever may edit the log",
                       where, p->audit.witness);
    if (p->audit.checkpoint_every && !p->audit.sign_key)
        return err_set(err, CORDON_E_POLICY,
                       "%saudit: checkpoint_every needs sign_key (checkpoints are signed)", where);
    for (size_t i = 0; i < p->n_secrets; i++) {
        const char *name = p->secrets[i].name;
        bool set = policy_env_set_find(p, name) >= 0;
        if (set || strv_contains(p->env_pass, p->n_env_pass, name))
            return err_set(err, CORDON_E_POLICY, "%ssecrets: \"%s\" is also in env.%s", where, name,
                           set ? "set" : "pass");
    }
    return 0;
}

/*
 * A bound host is one the user meant to reach, so it is allowed too, and
 * secrets only work through the gateway. Before the allow check below, so
 * a refusal names the secrets that asked for the gateway.
 */
static int imply_gateway(struct policy *p, const char *where, struct cordon_err *err)
{
    struct policy_network *n = &p->network;
    if (n->none_by_caller && !n->rules_by_caller) {
        /* The caller tightened to no network at all: what the rules allowed is moot. */
        policy_strv_free(n->allow, n->n_allow);
        policy_strv_free(n->ask, n->n_ask);
        for (size_t i = 0; i < p->n_secrets; i++)
            policy_secret_release(&p->secrets[i]);
        free(p->secrets);
        n->allow = n->ask = NULL;
        n->n_allow = n->n_ask = 0;
        p->secrets = NULL;
        p->n_secrets = 0;
    }
    if (p->n_secrets) {
        if (n->mode == POLICY_NET_NONE && n->mode_explicit)
            return err_set(err, CORDON_E_POLICY,
                           "%ssecrets: need network mode gateway (mode is none)", where);
        for (size_t i = 0; i < p->n_secrets; i++)
            for (size_t j = 0; j < p->secrets[i].n_hosts; j++)
                if (policy_strv_add(&n->allow, &n->n_allow, p->secrets[i].hosts[j]) < 0)
                    return err_set(err, CORDON_E_INTERNAL, "out of memory");
        n->mode = POLICY_NET_GATEWAY;
    }
    /* An allow entry implies the gateway, unless the policy said "none" outright. */
    if ((n->n_allow || n->n_ask) && n->mode == POLICY_NET_NONE) {
        if (n->mode_explicit)
            return err_set(err, CORDON_E_POLICY, "%snetwork.%s: needs mode gateway (mode is none)",
                           where, n->n_allow ? "allow" : "ask");
        n->mode = POLICY_NET_GATEWAY;
    }
    return 0;
}

/* Taken out last, so a name is unprotected however the sources were ordered. */
static void unprotect(struct policy *p)
{
    for (size_t i = 0; i < p->n_unprotect; i++)
        for (size_t j = 0; j < p->n_protected; j++)
            if (strcmp(p->protected[j], p -> unprotect[i]) == 0) {
                free(p->protected[j]);
                memmove(p->protected + j, p->protected + j + 1,
                        (p->n_protected - j - 1) * sizeof *p->protected);
                p->n_protected--;
                break;
            }
}

int policy_finalize(struct policy *p, struct cordon_err *err)
{
    p->finalized = false;
    char where[200] = "";
    if (p->origin)
        snprintf(where, sizeof where, "%s: ", p->origin);
    char why[200];
    TRY(settle_fs(p, where, err));
    TRY(check_binds(p, where, err));
    TRY(check_exclusive(p, where, err));
    TRY(imply_gateway(p, where, err));
    if (policy_tools_check(p, why, sizeof why) < 0)
        return err_set(err, CORDON_E_POLICY, "%stools: %s", where, why);
    if (policy_gov_check(p, why, sizeof why) < 0)
        return err_set(err, CORDON_E_POLICY, "%s%s", where, why);
    if (p->version != 1)
        return err_set(err, CORDON_E_POLICY, "%sversion: unsupported version %d", where,
                       p->version);
    if (p->tmp_size == 0 || p->shm_size == 0 || p->workspace_size == 0)
        return err_set(err, CORDON_E_POLICY, "%sfilesystem: tmpfs sizes must be greater than 0",
                       where);
    unprotect(p);
    int r = policy_net_build(p, why, sizeof why);
    if (r == POLICY_ENOMEM)
        return err_set(err, CORDON_E_INTERNAL, "out of memory");
    if (r < 0)
        return err_set(err, CORDON_E_POLICY, "%snetwork: %s", where, why);
    p->evidence_done = false; /* a relaxed (break-glass) policy is finalized again */
    p->finalized = true;
    return 0;
}
