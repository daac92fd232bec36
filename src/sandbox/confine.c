/*
 * sandbox/confine.c: the command's confinement chain (see confine.h). Runs
 * in the command between fork and exec; allocates nothing.
 */
#include "sandbox/confine.h"

#include "common/fds.h"
#include "common/syscalls.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <unistd.h>

void confine_add_rlimit(struct confine_plan *c, int resource, rlim_t soft, rlim_t hard)
{
    size_t i = 0;
    while (i < c->n_rlimits && c->rlimits[i].resource != resource)
        i++;
    if (i == CONFINE_MAX_RLIMITS)
        return; /* the planners add fewer than there is room for */
    c->rlimits[i] = (struct rlimit_step){ resource, { .rlim_cur = soft, .rlim_max = hard } };
    if (i == c->n_rlimits)
        c->n_rlimits++;
}

int confine_drop_capabilities(struct cordon_err *err)
{
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot clear ambient capabilities");
    struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
    struct __user_cap_data_struct data[2] = { { 0 } };
    if (sys_capset(&hdr, data) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot drop capabilities");
    return 0;
}

int confine_drop_bounding_set(uint64_t keep, struct cordon_err *err)
{
    /* Capabilities are numbered without gaps: the first number the kernel
     * calls invalid (EINVAL) is past its last one, and so is every later one. */
    for (int cap = 0; cap <= 63; cap++) {
        if (keep & (1ull << cap))
            continue;
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
            continue;
        if (errno == EINVAL)
            break;
        return err_sys(err, CORDON_E_SETUP, "cannot drop capability %d", cap);
    }
    return 0;
}

/* Exactly CAPS, across exec too: ambient for a command that is not uid 0. */
static int keep_capabilities(uint64_t caps, struct cordon_err *err)
{
    struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
    struct __user_cap_data_struct data[2] = { { 0 } };
    for (int i = 0; i < 2; i++)
        data[i].effective = data[i].permitted = data[i].inheritable = (uint32_t)(caps >> (32 * i));
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 || sys_capset(&hdr, data) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot set the container's capabilities");
    for (int cap = 0; cap < 64; cap++)
        if ((caps & (1ull << cap)) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot keep capability %d", cap);
    return 0;
}

static int apply_rlimits(const struct confine_plan *c, struct cordon_err *err)
{
    for (size_t i = 0; i < c->n_rlimits; i++)
        if (setrlimit(c->rlimits[i].resource, &c->rlimits[i].value) < 0)
            return err_sys(err, CORDON_E_SETUP, "cannot set resource limit %d",
                           c->rlimits[i].resource);
    return 0;
}

static int set_no_new_privs(struct cordon_err *err)
{
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot set no_new_privs");
    return 0;
}

static int apply_landlock(const struct confine_plan *c, struct cordon_err *err)
{
    if (!c->landlock.abi && c->landlock_required)
        return err_set(err, CORDON_E_UNSUPPORTED,
                       "this kernel has no Landlock, the only filesystem layer of this level");
    return landlock_plan_apply(&c->landlock, err);
}

/* The listener goes to the supervisor; the command keeps no copy. */
static int install_notifier(const struct seccomp_program *notify, int sock, struct cordon_err *err)
{
    int listener = seccomp_program_install_notifier(notify);
    if (listener < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot install the network filter");
    int rc = send_fd(sock, listener);
    close(listener);
    close(sock);
    if (rc < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot hand the network filter to the supervisor");
    return 0;
}

int confine_command_notified(const struct confine_plan *c, const struct seccomp_program *filter,
                             const struct seccomp_program *notify, int notify_sock,
                             struct cordon_err *err)
{
    TRY(set_no_new_privs(err)); /* Landlock and seccomp need it */
    /* Before the rlimits: building the ruleset opens a descriptor per rule,
     * which a low RLIMIT_NOFILE would refuse. */
    TRY(apply_landlock(c, err));
    TRY(apply_rlimits(c, err)); /* raising a hard limit needs the capabilities */
    if (c->keep_caps)
        TRY(keep_capabilities(c->keep_caps, err));
    else
        TRY(confine_drop_capabilities(err));
    if (notify)
        TRY(install_notifier(notify, notify_sock, err));
    if (c->extra_filter && c->extra_filter->len)
        TRY(seccomp_program_install(c->extra_filter, err));
    TRY(seccomp_program_install(filter, err)); /* last: it forbids the steps above */
    return 0;
}

int confine_command(const struct confine_plan *c, const struct seccomp_program *filter,
                    struct cordon_err *err)
{
    return confine_command_notified(c, filter, NULL, -1, err);
}
