# bench/bwrap_argv.sh: sourced by the benchmarks; sets bwrap_argv to bwrap
# configured as cordon's namespace level is (same namespaces, same binds).
bwrap_argv=(bwrap --unshare-user --unshare-pid --unshare-net --unshare-ipc --unshare-uts
    --unshare-cgroup --die-with-parent --new-session
    --ro-bind /usr /usr)
for l in /bin /lib /lib64 /sbin /lib32 /libx32; do
    if [ -L "$l" ]; then
        bwrap_argv+=(--symlink "$(readlink "$l")" "$l")
    elif [ -d "$l" ]; then
        bwrap_argv+=(--ro-bind "$l" "$l")
    fi
done
for f in /etc/ld.so.cache /etc/passwd /etc/group /etc/nsswitch.conf /etc/ssl/certs \
         /etc/alternatives; do
    [ -e "$f" ] && bwrap_argv+=(--ro-bind "$f" "$f")
done
bwrap_argv+=(--proc /proc --dev /dev --tmpfs /tmp --tmpfs /workspace --chdir /workspace
    --clearenv --setenv PATH /usr/local/bin:/usr/bin:/bin --setenv HOME /workspace
    --setenv LANG C.UTF-8)

