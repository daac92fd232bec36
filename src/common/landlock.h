/*
 * common/landlock.h: the Landlock layer stacked under the mounts (namespace
 * level) or standing alone (process level). The supervisor plans it before
 * clone(); the child, once its root is in place, opens the planned paths and
 * restricts itself. Nothing here allocates in the child. In common because
 * the egress gateway confines itself with it too.
 */
#pragma once
#include "common/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LANDLOCK_PLAN_MAX_RULES 256

enum landlock_access {
    LANDLOCK_RO = 1 << 0,        /* execute, read files, list directories */
    LANDLOCK_RW = 1 << 1,        /* RO plus create, write, remove, rename, truncate */
    LANDLOCK_DEV = 1 << 2,       /* RO plus write files and device ioctls (a /dev) */
    LANDLOCK_HOST_RW = 1 << 3,   /* RW but no FIFO, socket or device node made: a host tree
                                  whose contents host tools meet after the run */
    LANDLOCK_LIST = 1 << 4,      /* list directories only: a tree whose files are granted
                                  one by one (the process level's /proc) */
    LANDLOCK_HOST_KEPT = 1 << 5, /* HOST_RW but no name made (file, directory, link): a
                                    keeper makes each one, refusing protected names */
};

struct landlock_plan {
    int abi; /* 0: the kernel has no Landlock */
    uint64_t handled_fs;
    uint64_t handled_net; /* TCP rights refused outright (process level: no network
                                  namespace confines them); 0 leaves TCP alone */
    uint64_t scoped;
    size_t n_rules;
    struct {
        char path[512];  /* path as the child will see it */
        unsigned access; /* enum landlock_access */
        bool optional;   /* skip when the path is missing */
        int fd;          /* opened by the planner (O_PATH, no link followed), or -1:
                                  the child opens PATH; the plan's owner closes it */
    } rules[LANDLOCK_PLAN_MAX_RULES];
};

/* The kernel's Landlock ABI version, or 0 when unavailable. */
int landlock_abi(void);

/* Start a plan for this kernel's ABI: every fs right it knows is handled,
 * abstract unix sockets and signals are scoped (ABI >= 6). */
void landlock_plan_init(struct landlock_plan *plan, int abi);

/* Add PATH with ACCESS; -1 with ERR when the plan is full or PATH too long. */
int landlock_plan_add(struct landlock_plan *plan, const char *path, unsigned access, bool optional,
                      struct cordon_err *err);

/* Add the tree FD (O_PATH) names, opened already; PATH names it in messages. */
int landlock_plan_add_fd(struct landlock_plan *plan, int fd, const char *path, unsigned access,
                         struct cordon_err *err);

/* In the child: build the ruleset and restrict self. No-op when abi is 0. */
int landlock_plan_apply(const struct landlock_plan *plan, struct cordon_err *err);
