/*
 * tests/integration/hostile_agent.c: a guest agent that lies. It stands in
 * for /init in a real microvm guest (test_level_microvm.py boots it), greets
 * the host like the real agent, then answers the call with the attack its
 * command names ("attack-unknown", ...): frames of unknown type, lengths past
 * every cap, forged connection ids, terminal escapes in an error, an output
 * flood. Afterwards it hangs, so only the host side can end the run.
 */
#include "../../src/sandbox/microvm/vm_wire.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

static void put(int fd, uint32_t type, uint32_t len, const void *body, size_t n)
{
    uint32_t h[2] = { type, len };
    (void)!write(fd, h, sizeof h);
    if (n)
        (void)!write(fd, body, n);
}

static bool has(const char *buf, size_t n, const char *word)
{
    return memmem(buf, n, word, strlen(word)) != NULL;
}

/* The next frame's payload from the host (NULL if none), its length in *GOT. */
static char *next_frame(int ctl, uint32_t *type, size_t *got)
{
    uint32_t h[2];
    *got = 0;
    if (read(ctl, h, sizeof h) != sizeof h || h[1] > VM_CALL_MAX)
        return NULL;
    char *body = malloc(h[1] + 1);
    while (body && *got < h[1]) {
        ssize_t n = read(ctl, body + *got, h[1] - *got);
        if (n <= 0)
            break;
        *got += (size_t)n;
    }
    *type = h[0];
    return body;
}

int main(void)
{
    mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
    int ctl = open("/dev/vport0p1", O_RDWR);
    int eg = open("/dev/vport0p2", O_RDWR);
    put(ctl, VM_READY, 0, NULL, 0);
    static char junk[1 << 16];
    memset(junk, 'A', sizeof junk);
    uint32_t type = 0;
    size_t got;
    /* The setup: a bind named for an attack makes this guest lie here. */
    char *setup = next_frame(ctl, &type, &got);
    if (!setup || type != VM_SETUP)
        pause();
    if (has(setup, got, "attack-setup-unknown")) {
        put(ctl, 99, 4, "boom", 4);
    } else if (has(setup, got, "attack-setup-escapes")) {
        static const char msg[] = "\x01\x00\x00\x00\x1b[2J setup lie\r\nsecond";
        put(ctl, VM_ERROR, sizeof msg - 1, msg, sizeof msg - 1);
    } else if (has(setup, got, "attack-setup-stdout")) {
        put(ctl, VM_STDOUT, 5, "early", 5);
    } else {
        put(ctl, VM_SET, 0, NULL, 0);
    }
    char *call = next_frame(ctl, &type, &got);
    if (!call || type != VM_CALL)
        pause();
    if (has(call, got, "attack-unknown")) {
        put(ctl, 99, 4, "boom", 4);
    } else if (has(call, got, "attack-oversize")) {
        put(ctl, VM_STDOUT, 0xfffffff0u, junk, sizeof junk);
    } else if (has(call, got, "attack-forged-id")) {
        uint32_t id = 5000; /* past VM_EG_MAX_CONNS */
        put(eg, VM_EG_OPEN, 4, &id, 4);
    } else if (has(call, got, "attack-escapes")) {
        static const char msg[] = "\x01\x00\x00\x00\x1b[2J\x1b]0;pwned\x07 fake error\r\nsecond";
        put(ctl, VM_ERROR, sizeof msg - 1, msg, sizeof msg - 1);
    } else if (has(call, got, "attack-flood")) {
        /* Well-formed frames, each in one write, without end. */
        uint32_t fh[2] = { VM_STDOUT, 16384 };
        memcpy(junk, fh, sizeof fh);
        for (;;)
            (void)!write(ctl, junk, sizeof fh + 16384);
    } else if (has(call, got, "attack-double-ready")) {
        put(ctl, VM_READY, 0, NULL, 0);
    } else if (has(call, got, "attack-second-set")) {
        put(ctl, VM_SET, 0, NULL, 0);
    }
    for (;;)
        pause();
}
