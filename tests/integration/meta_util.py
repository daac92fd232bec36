"""
Metadata changes tried from inside a sandbox (the probe's `meta` action), and
what the host shows of a file before and after: its mode, owner, times
(ctime too, which any change moves and nothing can set back), extended
attributes and inode flags. Shared by test_level_process.py and
test_workspace_trust.py.
"""

import array
import errno
import fcntl
import os
import shlex

from conftest import PROBE

FS_IOC_GETFLAGS = 0x80086601
FOREIGN_GID = 4242  # a group neither the root nor the nobody caller is in

# Each change a file's owner could make without a capability: (op, args).
# {gid} is the caller's own group: chown to it is allowed to the owner.
META_OPS = [
    ("chmod", ["640"]), ("fchmod", ["640"]), ("fchmodat", ["640"]),
    ("fchmodat2-nofollow", ["640"]),
    ("chown", ["-1", "{gid}"]), ("lchown", ["-1", "{gid}"]), ("fchown", ["-1", "{gid}"]),
    ("fchownat-empty", ["-1", "{gid}"]),
    ("utimensat", []), ("futimens", []), ("utime", []), ("utimes", []), ("futimesat", []),
    ("futimesat-fd", []),
    ("setxattr", ["user.cordon", "evil"]), ("lsetxattr", ["user.cordon2", "evil"]),
    ("fsetxattr", ["user.cordon3", "evil"]),
    ("removexattr", ["user.keep"]), ("lremovexattr", ["user.keep2"]),
    ("fremovexattr", ["user.keep3"]),
    ("chattr", []),
]
# Newer than the libseccomp the allowlist is built with: refused at every level (EPERM).
ALLOWLIST_REFUSED = [("setxattrat", ["user.cordon4", "evil"]), ("removexattrat", ["user.keep4"])]
ALL_OPS = META_OPS + ALLOWLIST_REFUSED
KEEP = ("user.keep", "user.keep2", "user.keep3", "user.keep4")


def prepare(path, uid, gid_owner=FOREIGN_GID):
    """PATH as the tests expect it before a run: the caller's, in a foreign
    group, mode 0600 (0700 for a directory), old times, the xattrs in KEEP."""
    os.chown(path, uid, gid_owner)
    os.chmod(path, 0o700 if os.path.isdir(path) else 0o600)
    os.utime(path, (1500000000, 1500000000))
    for name in KEEP:
        os.setxattr(path, name, b"1")


def inode_flags(path):
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        buf = array.array("l", [0])
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, buf)
        return buf[0]
    except OSError:
        return None
    finally:
        os.close(fd)


def state(path):
    """What a metadata change would move."""
    st = os.lstat(path)
    xattrs = {n: os.getxattr(path, n, follow_symlinks=False)
              for n in os.listxattr(path, follow_symlinks=False)}
    return {"mode": oct(st.st_mode), "uid": st.st_uid, "gid": st.st_gid,
            "mtime": st.st_mtime_ns, "ctime": st.st_ctime_ns, "xattrs": xattrs,
            "flags": inode_flags(path)}


def script(targets, gid, ops=ALL_OPS):
    """A shell script trying each op on each target; prints 'TARGET OP STATUS' lines."""
    lines = []
    for t in targets:
        for op, args in ops:
            a = " ".join(x.format(gid=gid) for x in args)
            lines.append(f"{PROBE} meta {op} {t} {a} 2>/dev/null; "
                         f"echo {shlex.quote(t)} {op} $?")
    return "\n".join(lines) + "\n"


def codes(out):
    """{target: {op: status}} from script()'s output."""
    got = {}
    for line in out.splitlines():
        t, op, code = line.rsplit(" ", 2)
        got.setdefault(t, {})[op] = int(code)
    return got


REFUSED = (errno.EPERM, errno.EACCES, errno.EROFS, errno.ENOENT)

# Calls a level's kernel does not offer, and how it answers them, inside the
# workspace as outside: gVisor's sentry, and the microvm's guest kernel (6.1,
# its workspace a 9p share).
_XATTR_OPS = ("setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
              "fremovexattr")
NOT_OFFERED = {
    "gvisor": {"fchmodat2-nofollow": errno.ENOSYS, "fchownat-empty": errno.EBADF,
               "chattr": errno.ENOTTY, **{op: errno.EOPNOTSUPP for op in _XATTR_OPS}},
    "microvm": {"fchmodat2-nofollow": errno.ENOSYS, "chattr": errno.ENOTTY},
}


def expected(level, op, default):
    """What OP answers at LEVEL where it would otherwise answer DEFAULT."""
    if op in dict(ALLOWLIST_REFUSED):
        return errno.EPERM
    return NOT_OFFERED.get(level, {}).get(op, default)
