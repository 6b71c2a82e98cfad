#!/usr/bin/env bash
# Sessions with plain curl: the README's examples, as they are.
#
#   make run                                  # prints a development secret
#   SANDBOX_SECRET=<that secret> bash examples/session.sh
#
# SANDBOX_URL defaults to http://127.0.0.1:3030, where `make run` listens.
set -euo pipefail
U=${SANDBOX_URL:-http://127.0.0.1:3030}
S=${SANDBOX_SECRET:?set SANDBOX_SECRET to the secret that make run printed}

echo '== create_session: 201, or 200 with the existing one (reuse)'
curl -s -H "Authorization: Bearer $S" $U/create_session \
  -d '{"id": "thread-42", "workdir": "temp", "env": {"CI": "1"}, "idle_timeout": 1800, "reuse": true}'

echo '== run in it: cd and export last'
curl -s -H "Authorization: Bearer $S" $U/run \
  -d '{"cmd": "mkdir -p app && cd app && export STAGE=test", "session": "thread-42"}'
curl -s -H "Authorization: Bearer $S" $U/run \
  -d '{"cmd": "pwd; echo $STAGE $CI", "session": "thread-42"}'

echo '== list_sessions'
curl -s -H "Authorization: Bearer $S" $U/list_sessions

echo '== delete_session, then the id is unknown'
curl -s -H "Authorization: Bearer $S" $U/delete_session -d '{"id": "thread-42"}'
curl -s -H "Authorization: Bearer $S" $U/run -d '{"cmd": "true", "session": "thread-42"}'
