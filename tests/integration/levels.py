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
import os
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
        if in_levels and len(words) >= 2 and words[1] == "yes":
            found.append(words[0])
    return found or ["namespace"]


def selected(build):
    env = os.environ.get("CORDON_LEVELS")
    if env:
        return [l.strip() for l in env.split(",") if l.strip()]
    return available(build)


# The reasons, once each; every row below names one.
WS_PROTECTED = ("a host workspace is refused (125) while filesystem.protected names anything: "
                "Landlock cannot hold .git read-only beneath a writable tree")
NO_MOUNTS = ("no mount namespace: /workspace, /tmp and /dev/shm are not the run's own; the "
             "workspace, HOME and TMPDIR are host paths")
REFUSED_NOT_ABSENT = ("no private root: a path outside the allowlist exists and Landlock refuses "
                      "it (EACCES) rather than it being absent (ENOENT) or read-only (EROFS)")
NO_NETNS = ("no network namespace: --net none refuses every inet socket (EACCES); there is no "
            "loopback of the run's own and no interface list of its own")
HOST_PIDS = "no PID namespace: the host's process list is visible and its pids answer EPERM"
HOST_UID = ("no user namespace: the command keeps the caller's uid (root's stays uid 0 with no "
            "capabilities) and an unprivileged caller cannot empty the bounding set")
NO_TMPFS = ("no tmpfs: /tmp, /dev/shm and the scratch workspace have no size or inode caps "
            "(limits.file_size still holds)")
HOST_PROC = ("/proc is the host's, read-only under Landlock: opening its files for writing is "
             "refused (EACCES) before the kernel's own checks")
BIND_AT_DEST = "no mounts: a bind is made at its host path, so one at another path is refused"
UNIX_DGRAM = "unix datagram sockets are refused: each send names its address past connect()"
DIGEST_OF_FLAGS = ("the suite adds --level to each run, and the level is part of the effective "
                   "policy: its digest is not the one the test computed without it")
DAEMON_LEVEL = ("the daemon runs at its own policy's level (namespace); the cold run it is "
                "compared with runs at the suite's")

PROXY_ONLY = ("egress is proxy-only: no DNS stub and no synthetic addresses, so a client that "
              "ignores HTTP(S)_PROXY resolves nothing and reaches nothing")
TRANSPARENT = ["test_node_fetch_reaches_allowed_host", "test_python_without_proxy_variables",
               "test_refused_name_never_leaves_the_sandbox",
               "test_ports_and_addresses_the_policy_does_not_allow",
               "test_tls_server_name_must_be_the_host_behind_the_address",
               "test_http_host_must_be_the_host_behind_the_address",
               "test_wildcard_rule_caps_distinct_names",
               "test_tls_to_a_host_a_secret_is_bound_to_is_intercepted"]

# (level, node id glob, why the test cannot hold there)
EXCEPTIONS = [
    *[(lvl, f"*test_transparent_egress.py::{t}[[]*", PROXY_ONLY)
      for lvl in ("process", "gvisor", "microvm") for t in TRANSPARENT],
    # Tests of other features whose runs bind at another path or use a host workspace.
    ("process", "*test_governance.py::test_break_glass_run_is_marked_in_every_event[[]*", BIND_AT_DEST),
    ("process", "*test_governance.py::test_evidence_is_verifiable_offline[[]*", BIND_AT_DEST),
    ("process", "*test_governance.py::test_otlp_export_never_blocks_or_replaces_the_chain[[]*", BIND_AT_DEST),
    ("process", "*test_governance.py::test_otlp_export_sends_every_line_as_a_log_record[[]*", BIND_AT_DEST),
    ("process", "*test_governance.py::test_signed_policy_runs_and_names_its_signer[[]*", BIND_AT_DEST),
    ("process", "*test_governance.py::test_tampered_evidence_does_not_verify[[]*", BIND_AT_DEST),
    ("process", "*test_governance.py::test_trust_dir_applies_to_every_policy[[]*-good]", BIND_AT_DEST),
    ("process", "*test_governance.py::test_break_glass_approval_token[[]*", DIGEST_OF_FLAGS),
    ("process", "*test_governance.py::test_expect_policy_digest[[]*", DIGEST_OF_FLAGS),
    ("process", "*test_first_hour.py::test_handled_signal_exits_with_the_commands_status[[]*", WS_PROTECTED),
    ("process", "*test_first_hour.py::test_tool_caches_stay_out_of_the_workspace[[]*", WS_PROTECTED),
    ("process", "*test_first_hour.py::test_tty_cannot_push_input_anywhere[[]*", BIND_AT_DEST),
    ("process", "*test_first_hour.py::test_tty_is_the_sandboxs_own_terminal[[]*", BIND_AT_DEST),
    ("process", "*test_first_hour.py::test_tty_window_size_and_interrupt_are_passed_on[[]*", BIND_AT_DEST),
    ("process", "*test_serve.py::test_pooled_run_sees_nothing_of_the_previous_one[[]*", DAEMON_LEVEL),
    ("process", "*::test_daemon_does_not_outlive_the_run[[]*", WS_PROTECTED),
    ("process", "*::test_default_file_size_stops_a_4tib_sparse_file[[]*", WS_PROTECTED),
    ("process", "*::test_existing_links_are_left_alone[[]*", WS_PROTECTED),
    ("process", "*::test_existing_protected_files_are_read_only[[]*", WS_PROTECTED),
    ("process", "*::test_file_size_override_lifts_the_default[[]*", WS_PROTECTED),
    ("process", "*::test_git_repository_cannot_be_changed_or_replaced[[]*", WS_PROTECTED),
    ("process", "*::test_links_out_special_files_and_modes_are_undone[[]*", WS_PROTECTED),
    ("process", "*::test_missing_protected_names_cannot_be_created[[]*", WS_PROTECTED),
    ("process", "*::test_new_glob_names_are_reported_not_refused[[]*", WS_PROTECTED),
    ("process", "*::test_no_device_nodes[[]*", WS_PROTECTED),
    ("process", "*::test_normal_run_record[[]*", WS_PROTECTED),
    ("process", "*::test_not_executable_workspace_file[[]*", WS_PROTECTED),
    ("process", "*::test_ordinary_work_still_works[[]*", WS_PROTECTED),
    ("process", "*::test_secret_unreachable_via_planted_symlinks[[]*", WS_PROTECTED),
    ("process", "*::test_signal_is_passed_on_for_cleanup[[]*", WS_PROTECTED),
    ("process", "*::test_symlink_to_host_workspace_path_stays_inside[[]*", WS_PROTECTED),
    ("process", "*::test_unsafe_unprotect_lets_the_run_write_git[[]*", WS_PROTECTED),
    ("process", "*::test_value_nowhere_in_the_sandbox_view[[]*", WS_PROTECTED),
    ("process", "*::test_workspace_cannot_plant_setuid_files[[]*", WS_PROTECTED),
    ("process", "*::test_workspace_files_belong_to_caller[[]*", WS_PROTECTED),
    ("process", "*::test_workspace_host_file_readable[[]*", WS_PROTECTED),
    ("process", "*::test_host_socket_in_the_workspace_is_unreachable[[]*", WS_PROTECTED),
    ("process", "*::test_placeholders_do_not_survive_a_killed_cordon[[]*", WS_PROTECTED),
    ("process", "*::test_log_beside_the_workspace_is_not_visible[[]*", WS_PROTECTED),
    ("process", "*::test_file_size_limit[[]*", WS_PROTECTED),
    ("process", "*::test_result_through_planted_link_replaces_the_link[[]*", WS_PROTECTED),
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
    ("process", "*::test_proc_mem_of_sibling_not_writable[[]*", HOST_PROC),
    ("process", "*::test_proc_self_mem_cannot_force_readonly_pages[[]*", HOST_PROC),
    ("process", "*::test_host_loopback_listener_gets_nothing[[]*", NO_NETNS),
    ("process", "*::test_host_address_listener_gets_nothing[[]*", NO_NETNS),
    ("process", "*::test_public_address_unreachable[[]*", NO_NETNS),
    ("process", "*::test_local_http_server_inside[[]*", NO_NETNS),
    ("process", "*::test_loopback_inside_works[[]*", NO_NETNS),
    ("process", "*::test_only_loopback_interface[[]*", NO_NETNS),
    ("process", "*::test_tcp_and_udp_still_carry_bytes[[]*", NO_NETNS),
    ("process", "*::test_net_none_is_default[[]*", NO_NETNS),
    ("process", "*::test_host_pids_unreachable[[]*", HOST_PIDS),
    ("process", "*::test_host_proc_invisible[[]*", HOST_PIDS),
    ("process", "*::test_sandboxed_process_is_not_host_root[[]root-*", HOST_UID),
    ("process", "*::test_uid_inside_is_sandbox_user[[]*", HOST_UID),
    ("process", "*::test_default_pids_count_only_the_run[[]*", HOST_UID),
    ("process", "*::test_default_inode_caps[[]*", NO_TMPFS),
    ("process", "*::test_shm_has_its_own_size[[]*", NO_TMPFS),
    ("process", "*::test_inode_override_lifts_the_default[[]*", NO_TMPFS),
    ("process", "*::test_policy_check_prints_effective_policy[[]*", NO_TMPFS),
    ("process", "*::test_socket_protocols[[]*-process-inet-dgram-0]", NO_NETNS),
    ("process", "*::test_socket_protocols[[]*-process-inet-dgram-17]", NO_NETNS),
    ("process", "*::test_socket_protocols[[]*-process-inet-stream-0]", NO_NETNS),
    ("process", "*::test_socket_protocols[[]*-process-inet-stream-6]", NO_NETNS),
    ("process", "*::test_socket_protocols[[]*-process-inet6-dgram-17]", NO_NETNS),
    ("process", "*::test_socket_protocols[[]*-process-inet6-stream-6]", NO_NETNS),
    ("process", "*::test_socket_protocols[[]*unix-dgram*", UNIX_DGRAM),
    ("process", "*::test_syscall_refused[[]root-process-setuid0]", HOST_UID),
    ("process", "*::test_no_capabilities_and_no_new_privs[[]nobody-*", HOST_UID),
    ("process", "*::test_host_unix_socket_gets_nothing[[]*", "a host unix socket is refused at connect (EACCES), where the namespace level has no path to it (ENOENT)"),
]


def exception(nodeid, level):
    for lvl, pattern, why in EXCEPTIONS:
        if lvl == level and fnmatch.fnmatchcase(nodeid, pattern):
            return why
    return None
