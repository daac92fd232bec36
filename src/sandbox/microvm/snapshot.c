/*
 * sandbox/microvm/snapshot.c: a booted, idle guest saved once per layout and restored per
 * run (in the shim): the file's header, the guest memory as a sparse image
 * beside QEMU's device stream, and which snapshots are kept.
 */
#include "sandbox/microvm/microvm_int.h"

#include "common/fds.h"

#include <dirent.h>
#include <sys/mman.h>
#include <sys/sendfile.h>

/* ---- snapshots ---- */

/* The snapshot for V, opened and checked, positioned at QEMU's stream; -1 if none fits. */
/* The snapshot for V's layout, its header checked; *RAM_AT is where its memory starts. */
static int snapshot_open(const struct vm_plan *v, off_t *ram_at)
{
    int fd = open(v->snapshot, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    struct stat st;
    char head[SNAPSHOT_HEAD_LEN + 1];
    unsigned long long at = 0;
    char nl = 0;
    const size_t magic = sizeof SNAPSHOT_MAGIC - 1;
    /* Guest memory is code the guest runs: only a file no one else could
     * have written is trusted. */
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 022) ||
        (st.st_uid != 0 && st.st_uid != geteuid()) || !read_full(fd, head, SNAPSHOT_HEAD_LEN) ||
        memcmp(head, SNAPSHOT_MAGIC, magic) || memcmp(head + magic, v->digest, 64) ||
        head[magic + 64] != '\n' ||
        (head[SNAPSHOT_HEAD_LEN] = '\0',
         sscanf(head + magic + 65, "ram %16llx%c", &at, &nl) != 2) ||
        nl != '\n' || at % PAGE || at < SNAPSHOT_HEAD_LEN || (off_t)at > st.st_size) {
        close(fd);
        return -1;
    }
    *ram_at = (off_t)at;
    return fd;
}

/* The image from FD's offset RAM_AT on into the guest memory RAM of SIZE bytes:
 * only its data, the holes are zero already. */
static int ram_load(int fd, off_t ram_at, int ram, uint64_t size)
{
    for (off_t at = ram_at;;) {
        off_t data = lseek(fd, at, SEEK_DATA);
        if (data < 0)
            return errno == ENXIO ? 0 : -1;
        off_t hole = lseek(fd, data, SEEK_HOLE);
        if (hole < 0 || (uint64_t)(hole - ram_at) > size || lseek(ram, data - ram_at, SEEK_SET) < 0)
            return -1;
        for (off_t from = data; from < hole;) {
            ssize_t n = sendfile(ram, fd, &from, (size_t)(hole - from));
            if (n <= 0)
                return -1;
        }
        at = hole;
    }
}

/* The guest memory RAM of SIZE bytes into FD from RAM_AT on, zero pages left as holes. */
static bool ram_save(int fd, off_t ram_at, int ram, uint64_t size)
{
    const unsigned char *mem = mmap(NULL, size, PROT_READ, MAP_SHARED, ram, 0);
    if (mem == MAP_FAILED)
        return false;
    static const unsigned char zero[PAGE];
    bool ok = true;
    for (off_t at = 0; ok && (uint64_t)at < size;) {
        off_t data = lseek(ram, at, SEEK_DATA);
        if (data < 0) {
            ok = errno == ENXIO;
            break;
        }
        off_t end = lseek(ram, data, SEEK_HOLE);
        if (end < 0 || (uint64_t)end > size) {
            ok = false;
            break;
        }
        /* Runs of pages that are not all zero, written where they belong. */
        for (off_t p = data; ok && p < end;) {
            while (p < end && !memcmp(mem + p, zero, PAGE))
                p += PAGE;
            off_t run = p;
            while (p < end && memcmp(mem + p, zero, PAGE))
                p += PAGE;
            if (p > run)
                ok = pwrite_full(fd, mem + run, (size_t)(p - run), ram_at + run);
        }
        at = end;
    }
    munmap((void *)mem, size);
    return ok;
}

/* Keep the newest few snapshots: each kernel, initramfs or QEMU update leaves
 * one behind (tens of MB each) that no run can use again. */
#define SNAPSHOTS_KEPT 4

static void snapshot_prune(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct {
        char name[NAME_MAX + 1];
        struct timespec mtime;
    } keep[SNAPSHOTS_KEPT + 1];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        struct stat st;
        if (len < 6 || strcmp(e->d_name + len - 5, ".snap") ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
            continue;
        /* Insert by mtime, newest first; what falls off the end goes. */
        size_t at = n;
        while (at > 0 &&
               (keep[at - 1].mtime.tv_sec < st.st_mtim.tv_sec ||
                (keep[at - 1].mtime.tv_sec == st.st_mtim.tv_sec &&
                 keep[at - 1].mtime.tv_nsec < st.st_mtim.tv_nsec)))
            at--;
        if (at == SNAPSHOTS_KEPT) {
            unlinkat(dirfd(d), e->d_name, 0);
            continue;
        }
        if (n == SNAPSHOTS_KEPT) {
            unlinkat(dirfd(d), keep[n - 1].name, 0);
            n--;
        }
        memmove(&keep[at + 1], &keep[at], (n - at) * sizeof keep[0]);
        snprintf(keep[at].name, sizeof keep[at].name, "%s", e->d_name);
        keep[at].mtime = st.st_mtim;
        n++;
    }
    closedir(d);
}

/* Save the booted, idle guest (stopped meanwhile); failures only cost the snapshot. */
static void snapshot_save(const struct vm_plan *v, struct vm *vm)
{
    if (mkdir(v->snapshot_dir, 0755) < 0 && errno != EEXIST)
        return;
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s/.%d.tmp", v->snapshot_dir, (int)getpid());
    _cleanup_close_ int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    char line[4096], field[32];
    /* The memory's offset is known once the stream is written: a placeholder first. */
    snprintf(field, sizeof field, SNAPSHOT_RAM_FIELD, 0ull);
    bool ok = write(fd, SNAPSHOT_MAGIC, sizeof SNAPSHOT_MAGIC - 1) ==
            (ssize_t)(sizeof SNAPSHOT_MAGIC - 1) &&
        write(fd, v->digest, 64) == 64 && write(fd, "\n", 1) == 1 &&
        write(fd, field, strlen(field)) == (ssize_t)strlen(field);
    /* The stream carries the devices only: the memory is shared (the memfd)
     * and follows it as an image of its own. */
    ok = ok && qmp(vm->qmp, "{\"execute\":\"stop\"}\n", -1, line, sizeof line) == 0 &&
        qmp(vm->qmp,
            "{\"execute\":\"migrate-set-capabilities\",\"arguments\":{\"capabilities\":"
            "[{\"capability\":\"x-ignore-shared\",\"state\":true}]}}\n",
            -1, line, sizeof line) == 0 &&
        qmp(vm->qmp, "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"snap\"}}\n", fd, line,
            sizeof line) == 0 &&
        qmp(vm->qmp, "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"fd:snap\"}}\n", -1, line,
            sizeof line) == 0;
    for (int i = 0; ok && i < 1000; i++) {
        if (qmp(vm->qmp, "{\"execute\":\"query-migrate\"}\n", -1, line, sizeof line) < 0 ||
            strstr(line, "\"failed\"") || strstr(line, "\"cancelled\"")) {
            ok = false;
            break;
        }
        if (strstr(line, "\"completed\""))
            break;
        usleep(5000);
    }
    off_t end = ok ? lseek(fd, 0, SEEK_END) : -1;
    off_t ram_at = end < 0 ? -1 : (end + PAGE - 1) / PAGE * PAGE;
    if (ram_at >= 0)
        snprintf(field, sizeof field, SNAPSHOT_RAM_FIELD, (unsigned long long)ram_at);
    ok = ram_at >= 0 && ram_save(fd, ram_at, vm->ram, v->mem_mib << 20) &&
        pwrite_full(fd, field, strlen(field), SNAPSHOT_HEAD_LEN - strlen(field)) &&
        fsync(fd) == 0 && rename(tmp, v->snapshot) == 0;
    if (!ok)
        unlink(tmp);
    else
        snapshot_prune(v->snapshot_dir);
    /* Running again either way: this guest still takes the call. */
    qmp(vm->qmp, "{\"execute\":\"cont\"}\n", -1, line, sizeof line);
}

/*
 * Restore: 0 when the guest waits, paused, as the snapshot left it; -1 when
 * there is none that fits, -2 when one fit but did not load (it must boot
 * cold either way). The memory image is copied in while QEMU starts; the
 * device stream follows once it is in, as the devices' state reads it.
 */
int vm_restore(const struct vm_plan *v, struct vm *vm, struct cordon_err *err)
{
    off_t ram_at;
    _cleanup_close_ int fd = snapshot_open(v, &ram_at);
    if (fd < 0)
        return -1;
    if (vm_spawn(v, true, vm, err) < 0)
        return -2;
    char line[4096];
    /* The stream starts after the header (ram_load moved the offset). The
     * memory is QEMU's alone from here: ours goes. */
    int loaded = ram_load(fd, ram_at, vm->ram, v->mem_mib << 20);
    closep(&vm->ram);
    vm->ram = -1;
    if (loaded < 0 || lseek(fd, (off_t)SNAPSHOT_HEAD_LEN, SEEK_SET) < 0 ||
        qmp_handshake(vm->qmp) < 0 ||
        qmp(vm->qmp,
            "{\"execute\":\"migrate-set-capabilities\",\"arguments\":{\"capabilities\":"
            "[{\"capability\":\"x-ignore-shared\",\"state\":true}]}}\n",
            -1, line, sizeof line) < 0 ||
        qmp(vm->qmp, "{\"execute\":\"getfd\",\"arguments\":{\"fdname\":\"snap\"}}\n", fd, line,
            sizeof line) < 0 ||
        qmp(vm->qmp, "{\"execute\":\"migrate-incoming\",\"arguments\":{\"uri\":\"fd:snap\"}}\n", -1,
            line, sizeof line) < 0)
        goto bad;
    for (int i = 0; i < RESTORE_TIMEOUT_MS / 2; i++) {
        if (qmp(vm->qmp, "{\"execute\":\"query-status\"}\n", -1, line, sizeof line) < 0)
            goto bad;
        if (!strstr(line, "\"inmigrate\"")) {
            /* Left paused: vm_resume runs it when the call comes. */
            if (strstr(line, "\"paused\"") || strstr(line, "\"prelaunch\"") ||
                strstr(line, "\"postmigrate\""))
                return 0;
            goto bad; /* the stream did not load: boot cold */
        }
        usleep(1000);
    }
bad:
    vm_kill(vm);
    return -2;
}

int vm_boot(const struct vm_plan *v, bool save, struct vm *vm, struct cordon_err *err)
{
    TRY(vm_spawn(v, false, vm, err));
    if (qmp_handshake(vm->qmp) < 0 || wait_frame(vm, VM_READY, BOOT_TIMEOUT_MS, err) < 0) {
        if (err->kind == CORDON_E_OK)
            err_set(err, CORDON_E_SETUP, "microvm: QEMU did not start");
        vm_kill(vm);
        return -1;
    }
    if (save)
        snapshot_save(v, vm);
    closep(&vm->ram); /* the memory is QEMU's alone from here */
    vm->ram = -1;
    /* Waits paused, as a restored guest does: no vCPU time until the call. */
    char line[4096];
    if (qmp(vm->qmp, "{\"execute\":\"stop\"}\n", -1, line, sizeof line) < 0) {
        err_set(err, CORDON_E_SETUP, "microvm: QEMU did not pause the booted guest");
        vm_kill(vm);
        return -1;
    }
    return 0;
}

/* Run the guest that waited paused (in a pool, for as long as it waited). */
int vm_resume(struct vm *vm)
{
    char line[4096];
    return qmp(vm->qmp, "{\"execute\":\"cont\"}\n", -1, line, sizeof line);
}
