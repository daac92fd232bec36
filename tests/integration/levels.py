"""
The isolation levels the integration suite runs at, and the one table of
what differs between them.

CORDON_LEVELS (comma-separated) picks the levels; by default every level
`cordon check` reports available on this host. CI sets namespace,process.

EXCEPTIONS is the whole list of tests that cannot hold at a level, each with
the reason in one line: conftest marks them xfail(strict=True), so a test
that starts passing there fails the suite until its row goes. A row names
the level, a glob over the pytest node id, and the reason. To add a level
(gvisor, microvm), add it to MOUNTS if it shows a built root, and its rows.
"""

import fnmatch
import functools
import os
import pathlib
import signal
import subprocess

# Levels that build a root of their own: binds appear at their destination
# and the workspace at /workspace. The process level shows host paths.
MOUNTS = {"namespace": True, "process": False, "gvisor": True, "microvm": True}


def has_mounts(level):
    return MOUNTS.get(level, True)


def available(build):
    """The levels `cordon check` says this host can run."""
    try:
        out = subprocess.run([str(build / "cordon"), "check"], capture_output=True, text=True,
                             timeout=60).stdout
    except OSError:
        return ["namespace"]
    found, in_levels = [], False
    for line in out.splitlines():
        if line == "levels:":
            in_levels = True
            continue
        if in_levels and not line.startswith("  "):
            break
        words = line.split()
        # "yes", "yes (default)", or "yes, TCG: ..." (microvm: the suite adds --accel tcg)
        if in_levels and len(words) >= 2 and words[1].startswith("yes"):
            found.append(words[0])
    return found or ["namespace"]


def selected(build):
    env = os.environ.get("CORDON_LEVELS")
    if env:
        return [l.strip() for l in env.split(",") if l.strip()]
    return available(build)


@functools.cache
def host_has_abi(probe_bin, action):
    """Whether the host kernel runs the foreign ABI (ACTION: i386, x32) at all.
    Without it (no IA32 emulation, or a hypervisor beneath that refuses int
    0x80, as PVM guests do) the call faults (SIGSEGV) before any filter sees
    it, at every level alike."""
    p = subprocess.run([str(probe_bin), action], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return p.returncode != -signal.SIGSEGV


def host_has_i386():
    build = os.environ.get("CORDON_BUILD") or pathlib.Path(__file__).resolve().parents[2] / "build"
    return host_has_abi(pathlib.Path(build).resolve() / "probe", "i386")


# The reasons, once each; every row below names one. A row may end with
# conditions (functions of no argument): it holds only where all are true.
PROTECTED_LINK = ("no mounts to mask with: a protected symlink stays a link (read-only, not "
                  "removable), where the namespace level hides it under an empty file")
NO_MOUNTS = ("no mount namespace: /workspace, /tmp and /dev/shm are not the run's own; the "
             "workspace, HOME and TMPDIR are host paths")
REFUSED_NOT_ABSENT = ("no private root: a path outside the allowlist exists and Landlock refuses "
                      "it (EACCES) rather than it being absent (ENOENT) or read-only (EROFS)")
NO_NETNS = ("no network namespace: there is no loopback of the run's own (no inet listen) and no "
            "interface list of its own, and a UDP socket is a DNS stand-in: a datagram to port 53 "
            "goes to the stub, any other is refused (ECONNREFUSED) where the namespace level has "
            "no route for it (ENETUNREACH)")
HOST_PIDS = "no PID namespace: the host's process list is visible and its pids answer EPERM"
HOST_UID = ("no user namespace: the command keeps the caller's uid (root's stays uid 0 with no "
            "capabilities) and an unprivileged caller cannot empty the bounding set")
NO_TMPFS = ("no tmpfs: /tmp, /dev/shm and the scratch workspace have no size or inode caps "
            "(limits.file_size still holds)")
HOST_PROC = ("/proc is the host's, read-only under Landlock: opening its files for writing is "
             "refused (EACCES) before the kernel's own checks")
PROC_LISTED = ("for a root caller /proc is the host's narrowed by Landlock to what programs read: the command's own "
               "/proc/PID is readable, a child's /proc/self only listed (Landlock cannot name a "
               "process that does not exist yet): cat /proc/self/comm in a shell is EACCES")
BIND_AT_DEST = "no mounts: a bind is made at its host path, so one at another path is refused"
PROC_TTY = ("--tty is refused at process (125): its terminal would be the host's devpts "
            "(test_tty_is_given_or_refused_never_dropped)")
DIGEST_OF_FLAGS = ("the suite adds --level to each run, and the level is part of the effective "
                   "policy: its digest is not the one the test computed without it")
OVERLAY_NS = ("workspace.mode: overlay is refused (125): the level has no mount namespace of "
              "the run's own to hold an overlayfs over the workspace")
OVERLAY_ONLY_NS = ("workspace.mode: overlay is built at the namespace level only: gvisor's "
                   "mounts are runsc's and microvm's workspace is a 9p share; refused (125)")
HOST_VIEW = ("no PID or network namespace: a concurrent call's processes and abstract sockets "
             "are in the host's view, which the call shares (its connect()s are the keeper's)")
SERVE_PROBE = ("the probe is the namespace level's: it lists /tmp, /dev/shm and /workspace, reads "
               "/proc/keys and finds processes by command line, which this level has elsewhere, "
               "refuses or hides; test_pool.py's residue test is every level's")

GV_HOST_FD = ("gVisor shows a descriptor runsc passed in as host:[N] in /proc/self/fd, not "
              "pipe:[N] (the file is still relayed through a pipe)")
GV_HOST_PIDS = ("the session's processes are gVisor's, no host processes: the test's watch for "
                "them on the host (their command lines, a stopped agent's state) finds none; "
                "test_level_gvisor checks that no runsc process outlives a run")
GV_EXPOSE = ("session.expose is refused at gvisor (a clear error): the session has no network "
             "namespace of its own to forward into, its sockets are the Sentry's netstack's")
GUEST_EXPOSE = ("session.expose is refused at microvm (a clear error): the session has no network "
                "namespace of its own to forward into, its sockets are the guest kernel's")
GV_MASK = "a mask is an empty mode-0 file, not /dev/null: the gofer serves no host device"
GV_NO_MASK = ("runsc cannot mount over a link, socket or FIFO: a host workspace holding a "
              "protected link, a socket or a FIFO is refused (125) rather than masked in place")
GV_UID0 = ("the command is gVisor's uid 0 with no capability, not uid 1000: the gofer shows "
           "the caller's files as owned by 0, so 0 is the user that owns the workspace")
GV_TTY = ("--tty is refused at gvisor (125): runsc's --console-socket would hand the sandbox "
          "a host pty, not one of a devpts of its own")
GV_ISIG = ("gVisor's terminal (20221219) sends no SIGINT for a ^C written to its master, with "
           "isig on and the shell's group in the foreground: the interrupt is process.signal "
           "INT there (the REPL, stty size and resize work)")
GV_MOUNTINFO = ("gVisor's mountinfo shows only ro/rw: runsc is given nosuid and nodev, but "
                "this gVisor does not show them")
GV_DEV = ("gVisor's /dev also holds its own net/tun and fuse (the sentry's, usable only with "
          "capabilities the command lacks)")
GV_OVERHEAD = ("the run's cgroup holds gVisor itself, with 256 MiB added for it: a memory limit "
               "far below that does not end a small command")
GV_PROC = ("gVisor checks a /proc file's mode before its read-only mount: EACCES where Linux "
           "says EROFS (refused either way; the canaries stay intact)")
GV_NO_INODES = ("gVisor's tmpfs knows no nr_inodes: /tmp, /dev/shm and the workspace are capped "
                "by size only")

# (level, node id glob, why the test cannot hold there)
EXCEPTIONS = [
    ("gvisor", "*test_cli.py::test_stdin_file_is_relayed_not_passed[[]*", GV_HOST_FD),
    ("gvisor", "*::test_policy_check_prints_effective_policy[[]*", DIGEST_OF_FLAGS),
    ("gvisor", "*::test_masked_inside_a_read_only_bind[[]*", GV_MASK),
    ("gvisor", "*::test_existing_links_are_left_alone[[]*", GV_NO_MASK),
    ("gvisor", "*::test_uid_inside_is_sandbox_user[[]*", GV_UID0),
    ("gvisor", "*::test_probe_bind_is_the_mechanism[[]*", GV_UID0),
    ("gvisor", "*::test_sandbox_etc_has_only_what_programs_need[[]*", GV_UID0),
    ("gvisor", "*::test_tool_caches_stay_out_of_the_workspace[[]*", GV_UID0),
    ("gvisor", "*::test_every_mount_nosuid_and_nodev[[]*", GV_MOUNTINFO),
    ("gvisor", "*::test_dev_is_minimal[[]*", GV_DEV),
    ("gvisor", "*::test_memory_bomb_ends_with_oom[[]*", GV_OVERHEAD),
    ("gvisor", "*::test_default_memory_stops_a_hog[[]root-*", GV_OVERHEAD),
    ("gvisor", "*::test_default_inode_caps[[]*", GV_NO_INODES),
    ("gvisor", "*::test_inode_override_lifts_the_default[[]*", GV_NO_INODES),
    ("gvisor", "*::test_proc_mem_of_sibling_not_writable[[]*", GV_PROC),
    ("gvisor", "*::test_proc_self_mem_cannot_force_readonly_pages[[]*", GV_PROC),
    ("gvisor", "*::test_proc_files_not_writable[[]*-gvisor-/proc/self/timerslack_ns]", GV_PROC),
    ("gvisor", "*::test_proc_files_not_writable[[]*-gvisor-/proc/sys/kernel/hostname]", GV_PROC),
    ("gvisor", "*::test_tiny_memory_limit_ends_as_oom[[]*", GV_OVERHEAD),
    ("gvisor", "*::test_a_limit_below_what_a_slot_holds_still_ends_as_oom[[]*", GV_OVERHEAD),
    ("gvisor", "*test_serve.py::test_pooled_run_sees_nothing_of_the_previous_one[[]*", SERVE_PROBE),
    ("gvisor", "*::test_foreign_syscall_abi_killed[[]*-gvisor-i386]",
     "gVisor (ptrace platform) has no 32-bit ABI: int 0x80 runs as the x86-64 call of that "
     "number (i386 getpid, 20, is writev: EBADF), in the sentry, not killed", host_has_i386),
    ("gvisor", "*test_first_hour.py::test_tty_cannot_push_input_anywhere[[]*", GV_TTY),
    ("gvisor", "*test_first_hour.py::test_tty_is_the_sandboxs_own_terminal[[]*", GV_TTY),
    ("gvisor", "*test_first_hour.py::test_tty_window_size_and_interrupt_are_passed_on[[]*", GV_TTY),
    ("gvisor", "*test_live.py::test_terminal_repl_resize_and_interrupt[[]*", GV_ISIG),
    ("gvisor", "*test_sandboxd.py::test_a_terminal_repl_resize_and_interrupt[[]*", GV_ISIG),
    ("gvisor", "*::test_syscall_refused[[]*-gvisor-setuid0]", GV_UID0),
    ("gvisor", "*::test_sandboxed_process_is_not_host_root[[]root-*",
     "the command is no host process; the shim serving it is the caller's, root's here "
     "(gVisor's sentry runs as 65534 in a user namespace of its own)"),
    ("gvisor", "*::test_host_socket_in_the_workspace_is_unreachable[[]*", GV_NO_MASK),
    ("gvisor", "*::test_result_through_planted_link_replaces_the_link[[]*", GV_NO_MASK),
    # Tests of other features whose runs bind at another path or use a host workspace.
    # Tests of other features whose runs bind at another path.
    ("process", "*test_governance.py::test_break_glass_run_is_marked_in_every_event[[]*", BIND_AT_DEST),
    ("process", "*test_governance.py::test_evidence_is_verifiable_offline[[]*", BIND_AT_DEST),
    ("process", "*test_governance.py::test_otlp_export_never_blocks_or_replaces_the_chain[[]*", BIND_AT_DEST),
    ("process", "*test_governance.py::test_otlp_export_sends_every_line_as_a_log_record[[]*", BIND_AT_DEST),
    ("process", "*test_governance.py::test_signed_policy_runs_and_names_its_signer[[]*", BIND_AT_DEST),
    ("process", "*test_governance.py::test_tampered_evidence_does_not_verify[[]*", BIND_AT_DEST),
    ("process", "*test_governance.py::test_trust_dir_applies_to_every_policy[[]*-good]", BIND_AT_DEST),
    ("process", "*test_governance.py::test_the_callers_trust_dir_does_not_replace_the_hosts[[]*-evil-good]", BIND_AT_DEST),
    ("process", "*test_governance.py::test_no_network_tightens_a_policy_that_allows_hosts[[]*", BIND_AT_DEST),
    ("process", "*test_governance.py::test_break_glass_approval_token[[]*", BIND_AT_DEST),
    ("process", "*test_governance.py::test_expect_policy_digest[[]*", BIND_AT_DEST),
    ("process", "*::test_existing_links_are_left_alone[[]*", PROTECTED_LINK),
    ("process", "*::test_default_file_size_stops_a_4tib_sparse_file[[]*", NO_MOUNTS),
    ("process", "*::test_file_size_override_lifts_the_default[[]*", NO_MOUNTS),
    ("process", "*::test_symlink_to_host_workspace_path_stays_inside[[]*", NO_MOUNTS),
    ("process", "*test_first_hour.py::test_tool_caches_stay_out_of_the_workspace[[]*", NO_MOUNTS),
    ("process", "*::test_value_nowhere_in_the_sandbox_view[[]*", NO_MOUNTS),
    ("process", "*::test_log_beside_the_workspace_is_not_visible[[]*", REFUSED_NOT_ABSENT),
    ("process", "*test_first_hour.py::test_tty_cannot_push_input_anywhere[[]*", PROC_TTY),
    ("process", "*test_first_hour.py::test_tty_is_the_sandboxs_own_terminal[[]*", PROC_TTY),
    ("process", "*test_first_hour.py::test_tty_window_size_and_interrupt_are_passed_on[[]*", PROC_TTY),
    ("process", "*test_serve.py::test_pooled_run_sees_nothing_of_the_previous_one[[]*", SERVE_PROBE),
    ("process", "*test_pool.py::test_concurrent_pooled_calls_see_nothing_of_each_other[[]*",
     HOST_VIEW),
    ("process", "*::test_scratch_workspace_is_empty_and_writable[[]*", NO_MOUNTS),
    ("process", "*::test_tmp_is_private_and_capped[[]*", NO_MOUNTS),
    ("process", "*::test_home_and_cwd[[]*", NO_MOUNTS),
    ("process", "*::test_host_env_token_does_not_leak[[]*", NO_MOUNTS),
    ("process", "*::test_every_mount_nosuid_and_nodev[[]*", NO_MOUNTS),
    ("process", "*::test_magic_links_to_writable_targets_still_write[[]*", NO_MOUNTS),
    ("process", "*::test_post_body_arrives_intact[[]*", NO_MOUNTS),
    ("process", "*::test_byte_budget_cuts_download[[]*", NO_MOUNTS),
    ("process", "*::test_mountpoint_through_planted_link_refused[[]*", NO_MOUNTS),
    ("process", "*::test_bind_beneath_a_writable_bind_refused[[]*", NO_MOUNTS),
    ("process", "*::test_probe_bind_is_the_mechanism[[]*", NO_MOUNTS),
    ("process", "*::test_follow_symlinks_is_an_explicit_choice[[]*", BIND_AT_DEST),
    ("process", "*::test_masked_inside_a_read_only_bind[[]*", BIND_AT_DEST),
    ("process", "*::test_host_tree_invisible[[]*", REFUSED_NOT_ABSENT),
    ("process", "*::test_private_file_unreadable_by_path[[]*", REFUSED_NOT_ABSENT),
    ("process", "*::test_world_readable_home_file_invisible[[]*", REFUSED_NOT_ABSENT),
    ("process", "*::test_dev_is_minimal[[]*", REFUSED_NOT_ABSENT),
    ("process", "*::test_root_is_not_the_hosts[[]*", REFUSED_NOT_ABSENT),
    ("process", "*::test_sandbox_etc_has_only_what_programs_need[[]*", REFUSED_NOT_ABSENT),
    ("process", "*::test_proc_files_not_writable[[]*", HOST_PROC),
    ("process", "*test_kernel.py::test_proc_still_readable[[]root-*", PROC_LISTED),
    ("process", "*::test_proc_mem_of_sibling_not_writable[[]*", HOST_PROC),
    ("process", "*::test_proc_self_mem_cannot_force_readonly_pages[[]*", HOST_PROC),
    ("process", "*::test_public_address_unreachable[[]*", NO_NETNS),
    ("process", "*::test_local_http_server_inside[[]*", NO_NETNS),
    ("process", "*::test_loopback_inside_works[[]*", NO_NETNS),
    ("process", "*::test_only_loopback_interface[[]*", NO_NETNS),
    ("process", "*::test_tcp_and_udp_still_carry_bytes[[]*", NO_NETNS),
    ("process", "*::test_host_pids_unreachable[[]*", HOST_PIDS),
    ("process", "*::test_host_proc_invisible[[]*", HOST_PIDS),
    ("process", "*::test_sandboxed_process_is_not_host_root[[]root-*", HOST_UID),
    ("process", "*::test_uid_inside_is_sandbox_user[[]*", HOST_UID),
    ("process", "*::test_default_inode_caps[[]*", NO_TMPFS),
    ("process", "*::test_shm_has_its_own_size[[]*", NO_TMPFS),
    ("process", "*::test_inode_override_lifts_the_default[[]*", NO_TMPFS),
    ("process", "*::test_policy_check_prints_effective_policy[[]*", NO_TMPFS),
    ("process", "*::test_syscall_refused[[]root-process-setuid0]", HOST_UID),
    ("process", "*::test_no_capabilities_and_no_new_privs[[]nobody-*", HOST_UID),
    ("process", "*test_transactions.py::test_overlay_*[[]*", OVERLAY_NS),
    ("gvisor", "*test_transactions.py::test_overlay_*[[]*", OVERLAY_ONLY_NS),
    ("microvm", "*test_transactions.py::test_overlay_*[[]*", OVERLAY_ONLY_NS),
    ("process", "*test_transactions_crash.py::test_overlay_*[[]*", OVERLAY_NS),
    ("process", "*test_git_workspace.py::*[[]*-overlay]", OVERLAY_NS),
    ("gvisor", "*test_git_workspace.py::*[[]*-overlay]", OVERLAY_ONLY_NS),
    ("microvm", "*test_git_workspace.py::*[[]*-overlay]", OVERLAY_ONLY_NS),
    ("process", "*test_git_workspace.py::test_what_git_would_run_is_refused_overlay[[]*",
     OVERLAY_NS),
    ("gvisor", "*test_git_workspace.py::test_what_git_would_run_is_refused_overlay[[]*",
     OVERLAY_ONLY_NS),
    ("microvm", "*test_git_workspace.py::test_what_git_would_run_is_refused_overlay[[]*",
     OVERLAY_ONLY_NS),
    ("process", "*test_workspace_trust.py::test_venv_survives_and_other_links_out_do_not[[]*"
     "-overlay]", OVERLAY_NS),
    ("gvisor", "*test_workspace_trust.py::test_venv_survives_and_other_links_out_do_not[[]*"
     "-overlay]", OVERLAY_ONLY_NS),
    ("microvm", "*test_workspace_trust.py::test_venv_survives_and_other_links_out_do_not[[]*"
     "-overlay]", OVERLAY_ONLY_NS),
    ("gvisor", "*test_transactions_crash.py::test_overlay_*[[]*", OVERLAY_ONLY_NS),
    ("microvm", "*test_transactions_crash.py::test_overlay_*[[]*", OVERLAY_ONLY_NS),
    ("process", "*test_transactions_concurrent.py::test_overlay_*[[]*", OVERLAY_NS),
    ("gvisor", "*test_transactions_concurrent.py::test_overlay_*[[]*", OVERLAY_ONLY_NS),
    ("microvm", "*test_transactions_concurrent.py::test_overlay_*[[]*", OVERLAY_ONLY_NS),
    ("gvisor", "*test_live.py::test_destroy_leaves_nothing_behind[[]*", GV_HOST_PIDS),
    ("gvisor", "*test_serve.py::test_slow_and_vanished_clients_do_not_disturb_others[[]*",
     GV_HOST_PIDS),
    ("gvisor", "*test_serve.py::test_kill_9_leaves_nothing_and_a_restart_serves[[]*", GV_HOST_PIDS),
    ("gvisor", "*test_live.py::test_control_frames_for_an_agent_that_reads_none_are_bounded[[]*",
     GV_HOST_PIDS),
    ("gvisor", "*test_live.py::test_expose_*[[]*", GV_EXPOSE),
    ("gvisor", "*test_live.py::test_an_exposed_port_refuses_a_peer_gone_before_it_is_asked[[]*",
     GV_EXPOSE),
    ("microvm", "*test_live.py::test_destroy_leaves_nothing_behind[[]*",
     "the session's processes are the guest's, no host processes: the test's watch for "
     "them (pids_with) finds none to see go; QEMU's end is test_level_microvm's"),
    ("microvm", "*test_live.py::test_expose_*[[]*", GUEST_EXPOSE),
    ("microvm", "*test_live.py::test_an_exposed_port_refuses_a_peer_gone_before_it_is_asked[[]*",
     GUEST_EXPOSE),
    ("process", "*::test_an_exposed_port_refuses_a_peer_gone_before_it_is_asked[[]*",
     "expose needs a network namespace to forward into: the process level refuses it"),
    ("process", "*::test_host_unix_socket_gets_nothing[[]*", "a host unix socket is refused at connect (EACCES), where the namespace level has no path to it (ENOENT)"),
]


# The microvm level (under TCG here): the shared suite's CI subset at this
# level is test_runtime.py (`make integration-microvm`); the rest is by hand
# (test_filesystem.py, test_limits.py and test_cli.py pass there with the rows below).
GUEST_KERNEL = ("the command runs under the guest's own kernel: its processes are not host "
                "processes, and the guest kernel is built without namespaces (no /proc/self/ns)")
GUEST_NO_IA32 = ("the guest kernel has no 32-bit entry (IA32_EMULATION off): int 0x80 faults "
                 "(SIGSEGV) before any filter could see it")
GUEST_HOST_PIDS = ("the run's processes are the guest's, no host processes: the test's watch "
                   "for them on the host (their command lines, a stopped agent's state) finds "
                   "none; QEMU's end is test_level_microvm's")
GUEST_TTY = ("--tty is refused at microvm (125): the guest's agent gives a call no terminal yet "
             "(a live session's processes get theirs from the live agent)")
GUEST_RAM = ("the guest's RAM is the memory limit less QEMU's 96 MiB (224 MiB of 320M), its "
             "kernel's share inside it: 240 MB for one call's python is not there")
GUEST_SIT = ("the guest kernel (IPv6 built in) shows sit0, its IPv6-in-IPv4 tunnel device, down "
             "and with no NIC beneath it: nothing leaves the guest but the agent's ports")
GUEST_INIT_HIDDEN = ("pid 1 is the guest's init (the agent), which /proc's hidepid=invisible "
                     "hides from the command: /proc/1/mem is ENOENT, not EROFS or EACCES")
NPROC_GUEST = ("the command's processes are the guest's or the Sentry's, not the user's on the "
               "host: they cannot fill the user's process limit (at gvisor runsc's own threads "
               "do, and the run does not start), so the gateway that test starves starts")
NO_KEEPER = ("no keeper sees the command's connect() (gVisor's netstack, the guest's kernel): the "
             "relay takes only the allowed literals' ranges and ports, so an address no rule "
             "names has no route (EHOSTUNREACH) and is not told, and a refused one on such a "
             "port is reset (ECONNRESET)")
EXCEPTIONS += [
    ("gvisor", "*test_literals.py::test_literals_no_rule_allows_are_refused_and_told[[]*", NO_KEEPER),
    ("gvisor", "*test_literals.py::test_with_no_network_a_literal_is_told_too[[]*", NO_KEEPER),
    ("gvisor", "*test_network.py::test_public_address_unreachable[[]*", NO_KEEPER),
    ("microvm", "*test_network.py::test_public_address_unreachable[[]*", NO_KEEPER),
    ("microvm", "*test_literals.py::test_literals_no_rule_allows_are_refused_and_told[[]*",
     NO_KEEPER),
    ("microvm", "*test_literals.py::test_with_no_network_a_literal_is_told_too[[]*", NO_KEEPER),
]
EXCEPTIONS += [
    ("microvm", "*::test_policy_check_prints_effective_policy[[]*", DIGEST_OF_FLAGS),
    ("microvm", "*test_limits.py::test_supervisor_signal_tears_down[[]*", GUEST_KERNEL),
    ("microvm", "*test_limits.py::test_supervisor_sigkill_takes_the_run_with_it[[]*", GUEST_KERNEL),
    ("microvm", "*test_limits.py::test_cgroup_beneath_supervisor[[]*", GUEST_KERNEL),
    ("microvm", "*::test_sandboxed_process_is_not_host_root[[]*", GUEST_KERNEL),
    ("microvm", "*::test_syscall_refused[[]*-microvm-setns]", GUEST_KERNEL),
    ("microvm", "*::test_foreign_syscall_abi_killed[[]*-microvm-i386]", GUEST_NO_IA32,
     host_has_i386),
    ("microvm", "*test_signals.py::test_ignored_signal_is_followed_by_kill_after_grace[[]*",
     GUEST_KERNEL),
    ("microvm", "*test_signals.py::test_second_signal_kills_at_once[[]*", GUEST_KERNEL),
    ("microvm", "*test_audit.py::test_supervisor_signal_closes_the_record[[]*", GUEST_KERNEL),
    ("microvm", "*test_audit.py::test_supervisor_sigkill_watchdog_closes_the_record[[]*",
     GUEST_KERNEL),
    ("microvm", "*test_network.py::test_only_loopback_interface[[]*", GUEST_SIT),
    ("microvm", "*test_egress.py::test_a_gateway_that_cannot_start_is_recorded[[]*", NPROC_GUEST),
    ("gvisor", "*test_egress.py::test_a_gateway_that_cannot_start_is_recorded[[]*", NPROC_GUEST),
    ("microvm", "*test_first_hour.py::test_egress_refusal_told_as_it_happens[[]*",
     GUEST_HOST_PIDS),
    ("microvm", "*test_live.py::test_control_frames_for_an_agent_that_reads_none_are_bounded[[]*",
     GUEST_HOST_PIDS),
    ("microvm", "*test_pool.py::test_a_killed_supervisor_leaves_nothing_and_the_pool_goes_on[[]*",
     GUEST_HOST_PIDS),
    ("microvm", "*test_serve.py::test_slow_and_vanished_clients_do_not_disturb_others[[]*",
     GUEST_HOST_PIDS),
    ("microvm", "*test_serve.py::test_kill_9_leaves_nothing_and_a_restart_serves[[]*",
     GUEST_HOST_PIDS),
    ("microvm", "*test_first_hour.py::test_tty_cannot_push_input_anywhere[[]*", GUEST_TTY),
    ("microvm", "*test_first_hour.py::test_tty_is_the_sandboxs_own_terminal[[]*", GUEST_TTY),
    ("microvm", "*test_first_hour.py::test_tty_window_size_and_interrupt_are_passed_on[[]*",
     GUEST_TTY),
    ("microvm", "*test_pool.py::test_memory_a_call_leaves_charged_is_not_the_next_ones[[]root-*",
     GUEST_RAM),
    ("microvm", "*test_serve.py::test_pooled_run_sees_nothing_of_the_previous_one[[]*",
     SERVE_PROBE),
    ("microvm", "*test_kernel.py::test_proc_mem_of_init_not_writable[[]*", GUEST_INIT_HIDDEN),
]

# How each limit is held at each level, as the run's `enforcement` reports it
# (README's "Limits at each level" says why): {limit: {level: (as root, as an
# ordinary user)}}. "cgroup" stands for cgroup-v1 or cgroup-v2, whichever the
# host has; "kernel" is the level's own kernel (gVisor's, the guest's) for the
# whole sandbox; "memory" an inode count nothing holds but whose files cost
# memory the run's memory limit counts; "none" what nothing holds at all.
_ALL = {"namespace": None, "process": None, "gvisor": None, "microvm": None}
HELD_BY = {
    "wall": dict.fromkeys(_ALL, ("supervisor", "supervisor")),
    "output": dict.fromkeys(_ALL, ("supervisor", "supervisor")),
    "memory": {"namespace": ("cgroup", "rlimit"), "process": ("cgroup", "rlimit"),
               "gvisor": ("cgroup", "supervisor"), "microvm": ("cgroup", "rlimit")},
    "pids": {"namespace": ("cgroup", "rlimit"), "process": ("cgroup", "rlimit"),
             "gvisor": ("kernel", "kernel"), "microvm": ("kernel", "kernel")},
    "cpu": {"namespace": ("cgroup", "rlimit"), "process": ("cgroup", "rlimit"),
            "gvisor": ("cgroup", "supervisor"), "microvm": ("cgroup", "rlimit")},
    "file_size": dict.fromkeys(_ALL, ("rlimit", "rlimit")),
    "open_files": dict.fromkeys(_ALL, ("rlimit", "rlimit")),
}
for _fs in ("tmp", "shm", "workspace"):
    HELD_BY[_fs + "_size"] = {"namespace": ("tmpfs", "tmpfs"), "process": ("none", "none"),
                              "gvisor": ("tmpfs", "tmpfs"), "microvm": ("tmpfs", "tmpfs")}
    HELD_BY[_fs + "_inodes"] = {"namespace": ("tmpfs", "tmpfs"), "process": ("none", "none"),
                                "gvisor": ("memory", "memory"), "microvm": ("tmpfs", "tmpfs")}


def held_by(limit, level, root):
    """What the run's enforcement says holds LIMIT at LEVEL (see HELD_BY)."""
    return HELD_BY[limit][level][0 if root else 1]


def exception(nodeid, level):
    for lvl, pattern, why, *when in EXCEPTIONS:
        if lvl == level and fnmatch.fnmatchcase(nodeid, pattern) and all(w() for w in when):
            return why
    return None
