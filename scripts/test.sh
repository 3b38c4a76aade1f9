#!/usr/bin/env bash
# The whole test suite: sets up what it needs and builds every binary the end-to-end tests
# start (scripts/prepare.sh), then runs every test in the workspace and prints one closing
# tally: passed, failed and skipped, with each skip's capability and reason (see
# renderpool-testkit's skip()). Extra args go to cargo test; with any, everything is set up
# first and one cargo test runs them (with -p, only those crates).
#
# With no args, the set-up comes in two parts. The autoscaling pipeline's Go tools
# (tests/cluster/build.sh --late) and the previous release are a third of a cold set-up and only
# the tests in `late`, `beside_late` and `after_release` below need them: they build at the lowest
# CPU priority from the start, beside the rest of the set-up and then beside every other test,
# which see a bin folder without them (build.sh --early). The tests that need the tools alone
# start once the tools are built, without waiting for the previous release (on a cold machine it
# finishes last). On a warm machine both parts only check their caches.
set -euo pipefail
cd "$(dirname "$0")/.."
# The test targets of renderpool-tests that need a late tool, and the tests of real_node_jobs
# that do (KEDA): they run once the tools are built. Then those that need the previous release.
late=(autoscaling)
late_jobs_filter=scale_from_zero
after_release=(product)
# Test targets with no real node (a cluster of their own, or none) that run beside the real-node
# tests, which mostly wait (on the broker's ack wait, on controller periods): the images' tests,
# the jobs' (their servers on 127.0.0.1) and Office's (Gotenberg on 127.0.0.1) beside
# real_node_jobs' pod-loss tests, and the late ones with kwok nodes beside the late tests.
beside_early=(images jobs office)
beside_late=(karpenter e2e)

log=$(mktemp)
skips=$(mktemp)
late_dir=$(mktemp -d)
late_pids=()
stop_late() {
  for pid in "${late_pids[@]}" "${beside_pid[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
}
trap 'stop_late; rm -rf "$log" "$skips" "$late_dir"' EXIT
export RENDERPOOL_SKIP_LOG=$skips
status=0
run_tests() { # run_tests <cargo test args>...: one cargo test, its output added to the log
  cargo test --no-fail-fast "$@" 2>&1 | tee -a "$log" || status=$?
}
# shellcheck source=scripts/lib/idle.sh
. scripts/lib/idle.sh
# start_late <name> <command>...: at the lowest priority, stopped with this script.
start_late() {
  local name=$1
  shift
  (idle_session "$@") >"$late_dir/$name.out" 2>"$late_dir/$name.log" &
  late_pids+=("$!")
}
# start_beside <group> <test target>...: the targets' test binaries, built first, run one after
# another in a session of its own (cargo test holds the target dir's lock while its tests run, so
# a second cargo test would wait); end_beside <group> waits for them and adds their output to the
# log.
declare -A beside_pid=()
start_beside() {
  local group=$1 target exe exes=()
  shift
  for target; do
    # The test target's artifact (the package's binaries, which the tests start, are built too).
    exe=$(cargo test -p renderpool-tests --test "$target" --no-run --message-format=json |
      grep -F '"kind":["test"]' | grep -F "\"name\":\"$target\"" |
      sed -n 's/.*"executable":"\([^"]*\)".*/\1/p')
    [ -x "$exe" ] || { echo "test.sh: no test binary for $target" >&2; return 1; }
    exes+=("$exe")
  done
  # Where cargo test runs them: the package's folder.
  (cd tests && exec setsid bash -c \
    'failed=0; for exe; do "$exe" || failed=1; done; exit "$failed"' beside "${exes[@]}") >"$late_dir/beside-$group.log" 2>&1 &
  beside_pid[$group]=$!
}
end_beside() {
  local result=0
  [ -n "${beside_pid[$1]:-}" ] || return 1
  wait "${beside_pid[$1]}" || result=$?
  echo "test.sh: the tests run beside ($1):"
  tee -a "$log" <"$late_dir/beside-$1.log"
  return "$result"
}
# wait_late <index> <name>: waits for it (in this shell: a subshell has no children to wait
# for); when it failed, prints its log's end and fails.
wait_late() {
  wait "${late_pids[$1]}" && return 0
  echo "test.sh: the late set-up's $2 failed; its log ends:" >&2
  tail -n 40 "$late_dir/$2.log" >&2
  return 1
}

if [ $# -gt 0 ]; then
  setup_env=$(scripts/prepare.sh)
  eval "$setup_env"
  tests_start=$SECONDS
  scope=(--workspace)
  for arg in "$@"; do
    case $arg in -p | -p* | --package | --package=*) scope=() ;; esac
  done
  run_tests "${scope[@]}" "$@"
else
  start_late tools tests/cluster/build.sh --late
  setup_env=$(scripts/prepare.sh --early)
  eval "$setup_env"
  start_late release scripts/previous-release.sh
  tests_start=$SECONDS
  early=()
  for target in tests/tests/*.rs tests/tests/*/main.rs; do
    name=${target#tests/tests/}
    name=${name%/main.rs}
    name=${name%.rs}
    [[ " ${late[*]} ${beside_early[*]} ${beside_late[*]} ${after_release[*]} " == *" $name "* ]] || [ "$name" = real_node_jobs ] ||
      early+=(--test "$name")
  done
  # Every test binary runs even after one fails, so one run shows every failure.
  run_tests --workspace --exclude renderpool-tests
  run_tests -p renderpool-tests --lib --bins "${early[@]}"
  run_tests -p renderpool-tests --doc
  start_beside early "${beside_early[@]}" || status=1
  run_tests -p renderpool-tests --test real_node_jobs -- --skip "$late_jobs_filter"
  end_beside early || status=1
  waited=$SECONDS
  tools_ready=true
  wait_late 0 tools || tools_ready=false
  echo "test.sh: the early tests done at $((waited - tests_start))s, then $((SECONDS - waited))s waiting for the late tools"
  # What each late tool's build took, when it built (a cold machine's figures, for the README).
  sed -n 's/^\[[^]]*\] built /test.sh: late tool built: /p' "$late_dir/tools.log"
  if $tools_ready; then
    # Every tool now, warm: the bin folder with the late ones beside the rest.
    RENDERPOOL_CLUSTER_BIN=$(tests/cluster/build.sh | tail -n 1)
    export RENDERPOOL_CLUSTER_BIN
    start_beside late "${beside_late[@]}" || status=1
    run_tests -p renderpool-tests "${late[@]/#/--test=}"
    run_tests -p renderpool-tests --test real_node_jobs "$late_jobs_filter"
    end_beside late || status=1
  else
    status=1
  fi
  waited=$SECONDS
  if wait_late 1 release; then
    echo "test.sh: $((SECONDS - waited))s waiting for the previous release"
    RENDERPOOL_PREVIOUS_RELEASE=$(tail -n 1 "$late_dir/release.out")
    export RENDERPOOL_PREVIOUS_RELEASE
    run_tests -p renderpool-tests "${after_release[@]/#/--test=}"
  else
    status=1
  fi
fi
# cargo ends on the last crate's doc-test line; the tally covers every test binary. A skipped
# test passed as far as cargo knows: it is counted as skipped instead.
awk -F '\t' -v skips="$skips" '
  FILENAME == skips { if (!seen[$1]++) { s++; lines = lines sprintf("skipped: %s [%s]: %s\n", $1, $2, $3) } next }
  /^test result:/ { n = split($0, w, " "); for (i = 1; i < n; i++) { if (w[i+1] ~ /^passed/) p += w[i]; if (w[i+1] ~ /^failed/) f += w[i] } }
  END { printf "tests: %d passed, %d failed, %d skipped\n%s", p - s, f, s, lines }' "$skips" "$log"
echo "test.sh: set-up and build ${tests_start}s, tests $((SECONDS - tests_start))s"
exit "$status"
