# shellcheck shell=bash
# Shared helpers for up.sh, scheduler.sh and down.sh (sourced, not run).
# A process is ours only if it is the very process we started: its pid, its
# start time (recorded beside the pid) and the run directory on its command
# line all match. down.sh checks that before it signals a pid, so a recycled
# pid is never killed, even when a new run's process has the same pid and a
# run directory of the same name.

cp_log() { printf '%s: %s\n' "${CP_SCRIPT:-controlplane}" "$*" >&2; }
cp_die() { printf '%s: ERROR: %s\n' "${CP_SCRIPT:-controlplane}" "$*" >&2; exit 1; }

# cp_port_busy PORT: true if something listens on 127.0.0.1:PORT.
cp_port_busy() {
  if command -v ss >/dev/null 2>&1; then
    [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ] && return 0
  fi
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# cp_free_port VAR: sets VAR to a port that is free on 127.0.0.1 and not yet
# handed out by this shell. Ports come from below the kernel's ephemeral range
# (ip_local_port_range): a port picked inside it can be taken, before our server
# binds it, by one of the many client connections the apiserver opens to etcd
# (that made kube-controller-manager fail to start in CI). It sets a variable
# instead of printing so that the taken list survives (a $(...) runs in a
# subshell and would forget it).
CP_TAKEN_PORTS=" "
cp_free_port() {
  local var="$1" p lo=32768
  if [ -r /proc/sys/net/ipv4/ip_local_port_range ]; then
    read -r lo _ </proc/sys/net/ipv4/ip_local_port_range
  fi
  # Above the well-known Kubernetes ports (10250-10260), below the ephemeral ones.
  local base=11000 span=$((lo - 11000))
  [ "$span" -gt 1000 ] || cp_die "ephemeral port range starts at $lo; no room for test ports below it"
  for _ in $(seq 1 200); do
    p=$((base + (RANDOM * 32768 + RANDOM) % span))
    case "$CP_TAKEN_PORTS" in *" $p "*) continue ;; esac
    if ! cp_port_busy "$p"; then
      CP_TAKEN_PORTS="$CP_TAKEN_PORTS$p "
      printf -v "$var" '%s' "$p"
      return 0
    fi
  done
  cp_die "no free port found on 127.0.0.1"
}

# cp_started PID: the start time of process PID (clock ticks since boot,
# field 22 of /proc/PID/stat, read after the command name, which may hold
# spaces), or nothing if there is no such process. A pid reused by a later
# process has a later start time.
cp_started() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 0
  stat="${stat##*) }"
  # shellcheck disable=SC2086 # split the fields on purpose
  set -- $stat
  echo "${20:-}"
}

# cp_pid_alive RUN NAME: true if RUN/pids/NAME.pid names a live process of
# this run: the process started then (RUN/pids/NAME.start) with RUN, or a
# path in it, as one of its arguments.
cp_pid_alive() {
  local run="$1" name="$2" pid started
  [ -f "$run/pids/$name.pid" ] || return 1
  pid="$(cat "$run/pids/$name.pid")"
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  if [ -f "$run/pids/$name.start" ]; then
    started="$(cp_started "$pid")"
    [ -n "$started" ] && [ "$started" = "$(cat "$run/pids/$name.start")" ] || return 1
  fi
  # An argument that is RUN, or a path under it (`/tmp/run-1` is not
  # `/tmp/run-12`).
  tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qE -- "(^|=)$(printf '%s' "$run" | sed 's/[.[\*^$()+?{|]/\\&/g')(/|$)" || return 1
  # a zombie is not alive
  [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != "Z" ]
}

# cp_start RUN NAME BIN ARGS...: start BIN in the background, detached from
# the caller's terminal and process group, logging to RUN/logs/NAME.log;
# writes RUN/pids/NAME.pid, and the command line to RUN/cmd/NAME (arguments
# NUL-separated) so that restart.sh can start it again the same way.
cp_start() {
  local run="$1" name="$2"
  shift 2
  mkdir -p "$run/logs" "$run/pids" "$run/cmd"
  if cp_pid_alive "$run" "$name"; then
    cp_die "$name is already running in $run (pid $(cat "$run/pids/$name.pid"))"
  fi
  printf '%s\0' "$@" >"$run/cmd/$name"
  # setsid: its own session, so a Ctrl-C or a kill of the caller's process
  # group does not reach it half-way; down.sh (or the owner watcher) stops it.
  setsid "$@" </dev/null >>"$run/logs/$name.log" 2>&1 &
  echo $! >"$run/pids/$name.pid"
  cp_started $! >"$run/pids/$name.start"
  cp_log "started $name (pid $!), log $run/logs/$name.log"
}

# cp_poll RUN NAME TIMEOUT_S CMD...: poll CMD until it succeeds (0); 1 if
# NAME dies first, 2 if TIMEOUT_S passes (with the tail of NAME's log).
cp_poll() {
  local run="$1" name="$2" timeout="$3" start
  shift 3
  start=$(date +%s)
  while :; do
    if "$@" >/dev/null 2>&1; then
      cp_log "$name ready after $(($(date +%s) - start))s"
      return 0
    fi
    if ! cp_pid_alive "$run" "$name"; then
      tail -n 40 "$run/logs/$name.log" >&2 || true
      return 1
    fi
    if [ $(($(date +%s) - start)) -ge "$timeout" ]; then
      tail -n 40 "$run/logs/$name.log" >&2 || true
      return 2
    fi
    sleep 0.2
  done
}

# cp_wait RUN NAME TIMEOUT_S CMD...: cp_poll, failing if NAME is not ready.
cp_wait() {
  local status=0
  cp_poll "$@" || status=$?
  case $status in
    0) return 0 ;;
    1) cp_die "$2 exited before it became ready (log: $1/logs/$2.log)" ;;
    *) cp_die "$2 not ready after ${3}s (log: $1/logs/$2.log)" ;;
  esac
}

# cp_start_ready RUN NAME TIMEOUT_S START READY: run START (a function that
# starts NAME with cp_start, choosing its port afresh), then poll READY. A
# process that exits before it is ready (a port taken between choosing and
# binding, an API server that was not serving yet) is started again, up to
# three times; one that hangs is not.
cp_start_ready() {
  local run="$1" name="$2" timeout="$3" start_fn="$4" ready_fn="$5" attempt status
  for attempt in 1 2 3; do
    "$start_fn"
    status=0
    cp_poll "$run" "$name" "$timeout" "$ready_fn" || status=$?
    case $status in
      0) return 0 ;;
      1) cp_log "$name exited before it became ready (attempt $attempt of 3)"
         rm -f "$run/pids/$name.pid" ;;
      *) cp_die "$name not ready after ${timeout}s (log: $run/logs/$name.log)" ;;
    esac
  done
  cp_die "$name exited before it became ready, three times (log: $run/logs/$name.log)"
}

# cp_stop RUN NAME: stop the process of RUN/pids/NAME.pid (TERM, then KILL
# after $DRAGON_CP_STOP_GRACE seconds, default 15) and remove the pid file.
cp_stop() {
  local run="$1" name="$2" pid grace="${DRAGON_CP_STOP_GRACE:-15}"
  [ -f "$run/pids/$name.pid" ] || return 0
  pid="$(cat "$run/pids/$name.pid")"
  if cp_pid_alive "$run" "$name"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $((grace * 5))); do
      cp_pid_alive "$run" "$name" || break
      sleep 0.2
    done
    if cp_pid_alive "$run" "$name"; then
      cp_log "$name (pid $pid) ignored SIGTERM for ${grace}s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for _ in $(seq 1 25); do
        cp_pid_alive "$run" "$name" || break
        sleep 0.2
      done
    fi
    cp_log "stopped $name (pid $pid)"
  fi
  rm -f "$run/pids/$name.pid" "$run/pids/$name.start"
}

# cp_bin_dir: the directory holding the binaries: $DRAGON_CONTROLPLANE_BIN if
# set, else the last stdout line of build.sh (which builds only what the
# cache lacks).
cp_bin_dir() {
  if [ -n "${DRAGON_CONTROLPLANE_BIN:-}" ]; then
    echo "$DRAGON_CONTROLPLANE_BIN"
    return 0
  fi
  local out
  out="$("$CP_HERE/build.sh")" || cp_die "build.sh failed"
  printf '%s\n' "$out" | tail -n 1
}

# cp_curl_token URL: curl against the apiserver with the run's CA and token.
cp_curl_api() {
  curl -sf --max-time 5 --cacert "$CP_RUN/pki/ca.crt" \
    -H "Authorization: Bearer $(cat "$CP_RUN/token")" "$@"
}
