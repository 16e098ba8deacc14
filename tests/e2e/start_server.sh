# Sourced by the e2e scripts: starts `polykv serve` on a free loopback port with the extra arguments
# in the array $serve_args (a sourced script would otherwise see the caller's own arguments), waits
# until the port accepts a connection and sets $port and $pid; the server is stopped when the script
# exits. Needs $bin, $model and $work. Its stderr goes to $work/server.log ($log).
log="$work/server.log"
"$bin" serve -m "$model" --host 127.0.0.1 --port 0 -t 2 ${serve_args[@]+"${serve_args[@]}"} 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT
# The port from the "listening on" line, once a connection to it succeeds (bash's /dev/tcp).
port=""
for _ in $(seq 1 300); do
  port="$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$log" | head -n 1)"
  [ -n "$port" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  port=""
  kill -0 "$pid" 2>/dev/null || { echo "polykv serve exited:"; cat "$log"; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "polykv serve did not start:"; cat "$log"; exit 1; }
