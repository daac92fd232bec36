/*
 * sandbox/txn_int.h: what the scan (txn_scan.c) and the commit (txn.c)
 * of a transactional workspace share. Not for other modules.
 */
#pragma once
#include "sandbox/txn.h"

#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

enum txn_op { OP_ADD, OP_CHANGE, OP_REMOVE };

struct txn_entry {
    char *rel; /* relative to the workspace */
    enum txn_op op;
    mode_t mode;      /* the layer's (type and permissions); 0 for OP_REMOVE */
    bool clear_first; /* the host has something else there (or a directory to replace) */
    char *link;       /* a link's target */
    /* What the host had at REL when the scan read it (ino 0: nothing): the
     * commit applies only over that, so a change made since is not lost. */
    unsigned long long host_ino;
    struct timespec host_ctime;
};

struct txn {
    int upper; /* the layer's upper directory */
    int host;  /* the host workspace, O_PATH (borrowed) */
    const struct policy *p;
    struct txn_entry *e; /* in walk order: sorted names, a directory before its entries */
    size_t n, cap;
    EVP_MD_CTX *md;
    size_t visited;
};

/* REL beneath DIR, never through a link or a magic link; FLAGS | O_NOFOLLOW | O_CLOEXEC. */
int txn_open_beneath(int dir, const char *rel, int flags);

/* DIR's entry names, sorted; NULL on failure. Free with txn_free_list(). */
char **txn_list_dir(int dir, size_t *n);
void txn_free_list(char **v, size_t n);

/* Does NAME match one of P's filesystem.protected? */
bool txn_is_protected(const struct policy *p, const char *name);

/* What a committed entry may keep of its permissions: no set-id, no o+w. */
static inline mode_t txn_safe_mode(mode_t m)
{
    return m & 0775;
}
