# Sourced by scripts/demo.sh and scripts/test.sh: headings that carry the time since the
# start, and a ticker that says what is still running whenever one stage lasts a while, so
# that no step is silent for long (a cold build, apt-get, a wait, the end-to-end tests).
#   progress_start [NAME [SECONDS]]
#                              starts the clock and the ticker (a background loop); NAME
#                              begins its lines (default demo), SECONDS apart (default 10)
#   progress_stage TEXT [LOG]  prints "== [Ns] TEXT"; until the next stage the ticker prints
#                              "NAME: still at TEXT (N s, M s in all)" every SECONDS, with the
#                              last ninja "[n/N]" step found in LOG when one is given, or
#                              LOG's last line when it has no ninja step
#   progress_stop              stops the ticker (call it from the EXIT trap)
# shellcheck shell=bash

progress_dir='' progress_pid='' progress_t0=0 progress_count=0

progress_elapsed() {
  local now
  printf -v now '%(%s)T' -1
  echo "$((now - progress_t0))s"
}

progress_start() {
  local name=${1:-demo} interval=${2:-10}
  printf -v progress_t0 '%(%s)T' -1
  progress_dir=$(mktemp -d)
  local parent=$$
  (
    trap - EXIT
    # The caller's errexit and pipefail would end the ticker at a grep that finds nothing.
    set +e +o pipefail
    seen='' reported=0
    while kill -0 "$parent" 2>/dev/null; do
      sleep 1
      [[ -s $progress_dir/stage ]] || continue
      { read -r id; read -r since; read -r log; read -r label; } <"$progress_dir/stage" || continue
      printf -v now '%(%s)T' -1
      if [[ $id != "$seen" ]]; then
        seen=$id reported=$since
      fi
      ((now - reported >= interval)) || continue
      step=
      if [[ -n $log && -f $log ]]; then
        step=$(grep -o '^\[[0-9]*/[0-9]*\]' "$log" | tail -n 1 | tr -d '[]')
        [[ -n $step ]] && step="step $step" || step=$(tail -n 1 "$log" | cut -c1-100)
      fi
      echo "$name: still at ${label} ($((now - since)) s${step:+, $step}; $((now - progress_t0)) s in all)"
      reported=$now
    done
  ) &
  progress_pid=$!
}

progress_stage() {
  local label=$1 log=${2:-} now
  printf -v now '%(%s)T' -1
  echo "== [$((now - progress_t0))s] $label"
  [[ -n $progress_dir ]] || return 0
  progress_count=$((progress_count + 1))
  # Written aside and renamed: the ticker never reads half a file.
  printf '%s\n%s\n%s\n%s\n' "$progress_count" "$now" "$log" "$label" >"$progress_dir/stage.tmp"
  mv -f "$progress_dir/stage.tmp" "$progress_dir/stage"
}

progress_stop() {
  if [[ -n $progress_pid ]]; then
    kill "$progress_pid" 2>/dev/null || true
    wait "$progress_pid" 2>/dev/null || true
    progress_pid=
  fi
  [[ -z $progress_dir ]] || rm -rf "$progress_dir"
  progress_dir=
}
