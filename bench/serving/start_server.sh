# Sourced by the served benchmarks: start_ltserve BUILD_DIR REPOSITORY LOG [FLAG...] starts
# ltserve (with any further flags) on a free loopback gRPC port in the background and waits for
# it, setting SERVER (its pid) and ADDR (host:port). Returns 1, after printing the log and
# stopping the server, when it does not become ready.
start_ltserve() {
  local build=$1 repo=$2 log=$3
  shift 3
  "$build/server/app/ltserve" --model-repository "$repo" --host 127.0.0.1 --grpc-port 0 \
    --http-port -1 "$@" > "$log" 2>&1 &
  SERVER=$!
  for _ in $(seq 1 600); do
    grep -q "ltserve ready=" "$log" && break
    kill -0 "$SERVER" 2>/dev/null || break
    sleep 0.2
  done
  ADDR=$(grep -oE 'grpc=[0-9.]+:[0-9]+' "$log" | head -1 | cut -d= -f2)
  grep -E "ready|error|GPU" "$log"
  if [[ -z $ADDR ]] || ! grep -q "ltserve ready=true" "$log"; then
    echo "server did not become ready"
    cat "$log"
    kill "$SERVER" 2>/dev/null
    return 1
  fi
}
