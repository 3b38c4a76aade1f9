# Shared by scripts/test.sh and .ci/run: work that may take only what the rest leaves of the CPUs.
# Sourced, not run.

# idle_session <command>...: execs the command in a session of its own (so `kill -- -PID` stops
# all it starts) at the lowest CPU priority. Run it with `&`; $! is the session's id. The kernel
# gives each session (autogroup) an equal share of the CPUs whatever its processes' nice values,
# so the session's autogroup is set to nice 19 as well, where the kernel has autogroups.
idle_session() {
  exec setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null || true; exec nice -n 19 "$@"' idle "$@"
}
