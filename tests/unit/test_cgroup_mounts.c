/*
 * tests/unit/test_cgroup_mounts.c: the one reader of mountinfo's cgroup
 * mounts (cgroup_mounts_parse), which the run's limits and the OCI
 * runtime's extra hierarchies both use: escaped mount points, a bind of a
 * hierarchy's subtree, v1 beside v2, co-mounted controllers, and lines that
 * are not cgroup mounts or are cut short.
 */
#include "sandbox/cgroup.h"

#include "tap.h"

#include <stdlib.h>
#include <string.h>

static const char MOUNTINFO[] =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/mem\\040ory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
    "50 23 0:32 /pod/a /mnt/memory rw - cgroup cgroup rw,memory\n"
    "51 23 0:39 / /mnt/fake rw - cgroupfs none rw,memory\n"
    "52 23 0:40 / - cgroup\n"
    "53 23 0:41 /\n";

static const struct cgroup_mount *holding(const struct cgroup_mounts *ms, const char *c, size_t nth)
{
    for (size_t i = 0; i < ms->n; i++)
        if (cgroup_mount_holds(&ms->at[i], c) && nth-- == 0)
            return &ms->at[i];
    return NULL;
}

int main(void)
{
    struct cgroup_mounts ms;
    cgroup_mounts_parse(&ms, strdup(MOUNTINFO));
    ok(ms.n == 5, "the five cgroup and cgroup2 mounts are found, nothing else (%zu)", ms.n);

    const struct cgroup_mount *cpu = holding(&ms, "cpu", 0);
    ok(cpu && !strcmp(cpu->mnt, "/sys/fs/cgroup/cpu,cpuacct") && !strcmp(cpu->root, "/"),
       "a co-mounted hierarchy holds each of its controllers");
    ok(cpu == holding(&ms, "cpuacct", 0) && !holding(&ms, "cpus", 0) && !holding(&ms, "acct", 0),
       "a controller's name matches whole, not as a part of another's");
    const struct cgroup_mount *mem = holding(&ms, "memory", 0);
    ok(mem && !strcmp(mem->mnt, "/sys/fs/cgroup/mem ory"), "an escaped mount point is decoded (%s)",
       mem ? mem->mnt : "none");
    const struct cgroup_mount *bind = holding(&ms, "memory", 1);
    ok(bind && !strcmp(bind->root, "/pod/a") && !strcmp(bind->mnt, "/mnt/memory"),
       "a bind of a subtree keeps the hierarchy's path it shows");
    const struct cgroup_mount *v2 = holding(&ms, "", 0);
    ok(v2 && v2->v2 && !strcmp(v2->mnt, "/sys/fs/cgroup/unified") && !holding(&ms, "", 1),
       "the v2 hierarchy is the one held by \"\"");
    ok(!holding(&ms, "nsdelegate", 0), "a v2 mount holds no v1 controller by its options");
    ok(!holding(&ms, "memory", 2), "a file system that only looks like one is not a cgroup mount");
    ok(holding(&ms, "name=systemd", 0) != NULL && !holding(&ms, "systemd", 0),
       "a named hierarchy is matched by its option only");
    cgroup_mounts_free(&ms);
    ok(ms.n == 0 && !ms.text && !ms.at, "freed, it holds nothing");

    cgroup_mounts_parse(&ms, NULL);
    ok(ms.n == 0, "no text: no mounts");
    cgroup_mounts_free(&ms);
    return done_testing();
}
