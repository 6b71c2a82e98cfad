#!/usr/bin/env bash
# The npm eventsource package with an Authorization header
# (examples/logs_eventsource.mjs) on a process printing 200 numbered lines,
# through relay.mjs, which drops the first connection mid-event: the client
# reconnects by itself, sends Last-Event-ID, the agent resumes right after
# that line, and the client prints every line exactly once, in order, then
# stops on complete.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

port=${SANDBOX_URL##*:}
timeout 60 node "$CLIENTS_DIR/relay.mjs" "$port" 4000 >"$TMP/relay" &
BG_PIDS+=($!)
for _ in $(seq 50); do [ -s "$TMP/relay" ] && break; sleep 0.1; done
relay_port=$(head -n 1 "$TMP/relay")
[ -n "$relay_port" ] || fail "the relay did not start"

# shellcheck disable=SC2016 # expanded by the agent's shell
id=$(start_process 'for i in $(seq 1 200); do echo $i; sleep 0.02; done')
# As the example says: run where it is, after npm ci in examples/ (run.sh).
rc=0
SANDBOX_URL="http://127.0.0.1:$relay_port" timeout 30 node "$EXAMPLES_DIR/logs_eventsource.mjs" "$id" \
  >"$TMP/got" 2>"$TMP/err" || rc=$?
((rc == 0)) || { cat "$TMP/err" >&2; fail "logs_eventsource.mjs exited with $rc"; }

seq 1 200 | sed 's/^/[stdout] /' >"$TMP/want"
same "$TMP/want" "$TMP/got"

# The relay's record of the connections: the first cut with no
# Last-Event-ID, the second carrying one, answered from the next line on.
# The relay reports a connection when it closes, just after the client exits.
for _ in $(seq 50); do (($(wc -l <"$TMP/relay") >= 3)) && break; sleep 0.1; done
summary=$("$PY" - "$TMP/relay" "$TMP/err" <<'PY'
import json, sys
conns = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()[1:]]
# A connection on which no request arrived is the client's, not a stream:
# eventsource may open one as it is being closed, and the process exits
# before a byte is sent (seen under load). It must have got nothing.
idle = [c for c in conns if c["request"] is None]
assert all(c["firstId"] is None and c["cutId"] is None for c in idle), idle
conns = [c for c in conns if c["request"] is not None]
assert len(conns) == 2, f"{len(conns)} requests, want 2: {conns}"
first, second = conns
assert first["cutId"] and first["lastEventId"] is None and first["firstId"] == "1", first
cut = int(first["cutId"])
assert second["cutId"] is None, second
# The cut event's id line had arrived, but not the event: it must not count.
assert second["lastEventId"] == str(cut - 1), f"Last-Event-ID {second['lastEventId']}, want {cut - 1}"
assert second["firstId"] == str(cut), f"the agent resumed at line {second['firstId']}, want {cut}"
last = second["lastEventId"]
err = open(sys.argv[2]).read()
assert "connection lost" in err, err
print(f"the stream was cut inside line {cut}; the client reconnected with Last-Event-ID: {last}"
      f" and the agent resumed at line {second['firstId']}")
PY
) || fail "relay record: $(tail -n +2 "$TMP/relay")"
version=$(node -p 'require(process.argv[1]).version' "$EXAMPLES_DIR/node_modules/eventsource/package.json")
echo "200 lines once each, in order, then complete; $summary (eventsource $version)"
