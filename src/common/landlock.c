/*
 * common/landlock.c: the Landlock layer. The supervisor plans it before
 * clone() (landlock_abi, landlock_plan_init, landlock_plan_add); the child,
 * once its root is in place, applies the plan and restricts itself
 * (landlock_plan_apply), allocating nothing.
 *
 * Filesystem rights and IPC scopes are handled; TCP only where a level asks
 * (handled_net): at the namespace level it is left to the network namespace,
 * where loopback must keep working.
 */
#include "common/landlock.h"

#include "common/cleanup.h"
#include "common/syscalls.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>

/* The thirteen rights of ABI 1, EXECUTE (bit 0) through MAKE_SYM (bit 12). */
#define FS_ABI1 ((LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1)

#define FS_RO \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)

/* The kernel refuses directory rights on a rule whose path is not a directory. */
#define FS_FILE_ONLY                                                                             \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE | \
     LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)

int landlock_abi(void)
{
    int abi = sys_landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return abi < 0 ? 0 : abi;
}

void landlock_plan_init(struct landlock_plan *plan, int abi)
{
    /*
     * The header only: a rule is written whole when it is added, and none
     * past n_rules is read. Zeroing all 256 (130 KB) cost every run the
     * page faults of memory it never uses.
     */
    plan->abi = 0;
    plan->handled_fs = plan->handled_net = plan->scoped = 0;
    plan->n_rules = 0;
    if (abi <= 0)
        return;
    plan->abi = abi;
    plan->handled_fs = FS_ABI1;
    if (abi >= 2)
        plan->handled_fs |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        plan->handled_fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5)
        plan->handled_fs |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    if (abi >= 6)
        plan->scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
}

int landlock_plan_add(struct landlock_plan *plan, const char *path, unsigned access, bool optional,
                      struct cordon_err *err)
{
    if (plan->n_rules >= LANDLOCK_PLAN_MAX_RULES)
        return err_set(err, CORDON_E_SETUP,
                       "cannot plan landlock access to '%s': more than %d paths", path,
                       LANDLOCK_PLAN_MAX_RULES);
    size_t len = strlen(path);
    if (len >= sizeof plan->rules[0].path)
        return err_set(err, CORDON_E_SETUP,
                       "cannot plan landlock access to '%.64s...': path too long", path);
    memcpy(plan->rules[plan->n_rules].path, path, len + 1);
    plan->rules[plan->n_rules].access = access;
    plan->rules[plan->n_rules].optional = optional;
    plan->rules[plan->n_rules].fd = -1;
    plan->n_rules++;
    return 0;
}

int landlock_plan_add_fd(struct landlock_plan *plan, int fd, const char *path, unsigned access,
                         struct cordon_err *err)
{
    TRY(landlock_plan_add(plan, path, access, false, err));
    plan->rules[plan->n_rules - 1].fd = fd;
    return 0;
}

static uint64_t rights_for(const struct landlock_plan *plan, unsigned access)
{
    uint64_t rights = 0;
    if (access & LANDLOCK_RO)
        rights |= FS_RO;
    if (access & LANDLOCK_RW)
        rights |= plan->handled_fs;
    if (access & LANDLOCK_HOST_RW)
        rights |= plan->handled_fs &
            ~(uint64_t)(LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_SOCK |
                        LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK);
    if (access & LANDLOCK_HOST_KEPT)
        rights |= plan->handled_fs &
            ~(uint64_t)(LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_SOCK |
                        LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
                        LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_DIR |
                        LANDLOCK_ACCESS_FS_MAKE_SYM);
    if (access & LANDLOCK_DEV)
        rights |= FS_RO | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_IOCTL_DEV;
    if (access & LANDLOCK_LIST)
        rights |= LANDLOCK_ACCESS_FS_READ_DIR;
    return rights & plan->handled_fs;
}

/* The attribute grew a field at ABI 4 (net) and ABI 6 (scoped). */
static size_t attr_size(int abi)
{
    if (abi < 4)
        return sizeof(uint64_t);
    if (abi < 6)
        return 2 * sizeof(uint64_t);
    return sizeof(struct cordon_landlock_ruleset_attr);
}

static int add_path(int ruleset, const struct landlock_plan *plan, size_t i, struct cordon_err *err)
{
    const char *path = plan->rules[i].path;
    _cleanup_close_ int fd =
        plan->rules[i].fd >= 0 ? dup(plan->rules[i].fd) : open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) {
        if (plan->rules[i].optional && (errno == ENOENT || errno == ENOTDIR))
            return 0;
        return err_sys(err, CORDON_E_SETUP, "landlock: cannot open '%s'", path);
    }
    struct stat st;
    if (fstat(fd, &st) < 0)
        return err_sys(err, CORDON_E_SETUP, "landlock: cannot stat '%s'", path);

    struct landlock_path_beneath_attr rule = {
        .allowed_access = rights_for(plan, plan->rules[i].access),
        .parent_fd = fd,
    };
    if (!S_ISDIR(st.st_mode))
        rule.allowed_access &= FS_FILE_ONLY;
    if (rule.allowed_access == 0)
        return 0; /* the kernel refuses an empty rule; nothing to grant */
    if (sys_landlock_add_rule(ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) < 0)
        return err_sys(err, CORDON_E_SETUP, "landlock: cannot add a rule for '%s'", path);
    return 0;
}

int landlock_plan_apply(const struct landlock_plan *plan, struct cordon_err *err)
{
    if (plan->abi <= 0)
        return 0;
    struct cordon_landlock_ruleset_attr attr = {
        .handled_access_fs = plan->handled_fs,
        .handled_access_net = plan->abi >= 4 ? plan->handled_net : 0,
        .scoped = plan->scoped,
    };
    _cleanup_close_ int ruleset = sys_landlock_create_ruleset(&attr, attr_size(plan->abi), 0);
    if (ruleset < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot create a landlock ruleset (abi %d)", plan->abi);
    for (size_t i = 0; i < plan->n_rules; i++)
        TRY(add_path(ruleset, plan, i, err));

    /* restrict_self demands it of a task without CAP_SYS_ADMIN; harmless to repeat. */
    if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot set no_new_privs");
    if (sys_landlock_restrict_self(ruleset, 0) < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot enforce the landlock ruleset");
    return 0;
}
