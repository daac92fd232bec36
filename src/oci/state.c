/*
 * oci/state.c: a container's state between the runtime's invocations, in
 * ROOT/ID/state.json beside a lock every command takes. Whether the
 * container still runs is never taken from the file alone: its init is
 * looked at (alive, and the same process: its start time).
 */
#include "oci/oci.h"

#include "common/json.h"

#include "common/cleanup.h"
#include "common/procfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

const char *oci_status_name(enum oci_status s)
{
    static const char *const names[] = { "creating", "created", "running", "paused", "stopped" };
    return names[s];
}

bool oci_id_valid(const char *id)
{
    size_t n = strlen(id);
    return n > 0 && n < 200 && strcmp(id, ".") && strcmp(id, "..") &&
        strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+-.") == n;
}

static int lock_dir(struct oci_state *st, struct cordon_err *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/lock", st->dir);
    st->lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (st->lock < 0)
        return err_sys(err, CORDON_E_SETUP, "cannot open '%s'", path);
    while (flock(st->lock, LOCK_EX) < 0)
        if (errno != EINTR)
            return err_sys(err, CORDON_E_SETUP, "cannot lock '%s'", path);
    return 0;
}

int oci_state_new(const char *id, struct oci_state *st, struct cordon_err *err)
{
    memset(st, 0, sizeof *st);
    st->lock = -1;
    if (!oci_id_valid(id))
        return err_set(err, CORDON_E_USAGE, "invalid container id '%s'", id);
    snprintf(st->id, sizeof st->id, "%s", id);
    char parents[4096];
    snprintf(parents, sizeof parents, "%s", oci_opts.root);
    for (char *s = parents + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        (void)mkdir(parents, 0711);
        *s = '/';
    }
    if (mkdir(oci_opts.root, 0711) < 0 && errno != EEXIST)
        return err_sys(err, CORDON_E_SETUP, "cannot create root '%s'", oci_opts.root);
    snprintf(st->dir, sizeof st->dir, "%s/%s", oci_opts.root, id);
    if (mkdir(st->dir, 0711) < 0) {
        if (errno == EEXIST)
            return err_set(err, CORDON_E_USAGE, "container with id exists: %s", id);
        return err_sys(err, CORDON_E_SETUP, "cannot create '%s'", st->dir);
    }
    st->doc = json_pack("{s:s}", "id", id);
    if (lock_dir(st, err) < 0) {
        oci_state_remove(st);
        return -1;
    }
    return 0;
}

int oci_state_open(const char *id, struct oci_state *st, struct cordon_err *err)
{
    memset(st, 0, sizeof *st);
    st->lock = -1;
    if (!oci_id_valid(id))
        return err_set(err, CORDON_E_USAGE, "invalid container id '%s'", id);
    snprintf(st->id, sizeof st->id, "%s", id);
    snprintf(st->dir, sizeof st->dir, "%s/%s", oci_opts.root, id);
    struct stat sb;
    if (stat(st->dir, &sb) < 0)
        return err_set(err, CORDON_E_USAGE, "container does not exist: %s", id);
    TRY(lock_dir(st, err));
    char path[4200];
    snprintf(path, sizeof path, "%s/state.json", st->dir);
    st->doc = json_parse_strict_file(path, 0, NULL);
    if (!st->doc) /* create has not written it yet, or died first */
        st->doc = json_pack("{s:s, s:s}", "id", id, "status", "creating");
    return st->doc ? 0 : err_set(err, CORDON_E_INTERNAL, "out of memory");
}

int oci_state_save(struct oci_state *st, struct cordon_err *err)
{
    char path[4200], tmp[4250];
    snprintf(path, sizeof path, "%s/state.json", st->dir);
    snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
    if (json_dump_file(st->doc, tmp, JSON_COMPACT) < 0 || rename(tmp, path) < 0) {
        unlink(tmp);
        return err_sys(err, CORDON_E_SETUP, "cannot write '%s'", path);
    }
    return 0;
}

void oci_state_close(struct oci_state *st)
{
    closep(&st->lock);
    st->lock = -1;
    json_decref(st->doc);
    st->doc = NULL;
}

static void remove_tree(int dir)
{
    DIR *d = fdopendir(dir);
    if (!d) {
        close(dir);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) < 0 && errno == EISDIR) {
            int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                remove_tree(sub);
            unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
        }
    }
    closedir(d);
}

void oci_state_remove(struct oci_state *st)
{
    int fd = open(st->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0)
        remove_tree(fd);
    rmdir(st->dir);
}

long long oci_state_int(const struct oci_state *st, const char *key)
{
    return json_integer_value(json_object_get(st->doc, key));
}

const char *oci_state_str(const struct oci_state *st, const char *key)
{
    return json_string_value(json_object_get(st->doc, key));
}

/* Field 22 of /proc/PID/stat (start time) and its state; 0 when it is gone. */
static unsigned long long start_time(pid_t pid, char *state)
{
    char buf[1024];
    const char *stat = proc_stat(pid, buf, sizeof buf);
    unsigned long long t;
    if (!stat || !proc_stat_field(stat, 22, &t))
        return 0;
    *state = stat[0];
    return t;
}

unsigned long long oci_proc_start_time(pid_t pid)
{
    char state;
    return start_time(pid, &state);
}

bool oci_proc_is(pid_t pid, unsigned long long start)
{
    char state = '?';
    unsigned long long t = start_time(pid, &state);
    return t && t == start && state != 'Z' && state != 'X';
}

pid_t oci_state_init(const struct oci_state *st)
{
    pid_t pid = (pid_t)oci_state_int(st, "pid");
    if (pid <= 0 || !oci_proc_is(pid, (unsigned long long)oci_state_int(st, "pid_start")))
        return 0;
    return pid;
}

enum oci_status oci_state_status(const struct oci_state *st)
{
    const char *s = oci_state_str(st, "status");
    if (!s || !strcmp(s, "creating"))
        return OCI_CREATING;
    if (!oci_state_init(st))
        return OCI_STOPPED;
    if (!strcmp(s, "created"))
        return OCI_CREATED;
    return oci_frozen(st) ? OCI_PAUSED : OCI_RUNNING;
}

json_t *oci_state_json(const struct oci_state *st)
{
    enum oci_status s = oci_state_status(st);
    /* clang-format off */
    json_t *out = json_pack("{s:s, s:s, s:s, s:i, s:O?, s:O?, s:O?, s:s}",
                            "ociVersion", "1.0.2", "id", st->id, "status", oci_status_name(s),
                            "pid", s == OCI_STOPPED ? 0 : (int)oci_state_int(st, "pid"),
                            "bundle", json_object_get(st->doc, "bundle"),
                            "rootfs", json_object_get(st->doc, "rootfs"),
                            "created", json_object_get(st->doc, "created"),
                            "owner", "");
    /* clang-format on */
    json_t *ann = json_object_get(st->doc, "annotations");
    if (out && ann)
        json_object_set(out, "annotations", ann);
    return out;
}
