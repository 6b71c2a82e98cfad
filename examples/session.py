#!/usr/bin/env python3
"""Drive a session with requests, as a coding agent does.

    SANDBOX_SECRET=<secret> python3 examples/session.py [THREAD_ID]

SANDBOX_URL defaults to http://127.0.0.1:3030 (`make run`). Needs the requests
package (Debian: apt-get install python3-requests).

The session is keyed by the caller's own thread id: create_session with
"reuse": true is safe to call before every turn. In its private temp workdir
the script makes a project with a virtualenv-like activate script, then runs
`cd app`, `source .venv/bin/activate` and the "tests" as three separate calls:
the directory and the activated environment carry over from one call to the
next. The last command is streamed. Finally it deletes the session, which kills
what is left running in it and removes the workdir.
"""
import json
import os
import sys

import requests

base_url = os.environ.get('SANDBOX_URL', 'http://127.0.0.1:3030')
thread_id = sys.argv[1] if len(sys.argv) > 1 else 'thread-42'
http = requests.Session()
http.headers['Authorization'] = f"Bearer {os.environ['SANDBOX_SECRET']}"


def post(path, body):
    response = http.post(f'{base_url}{path}', json=body, timeout=60)
    if response.status_code >= 400:
        sys.exit(f'{path}: {response.status_code} {response.json()["error"]}')
    return response


def run(cmd):
    """Runs cmd in the session; prints and returns its stdout."""
    result = post('/run', {'cmd': cmd, 'session': thread_id}).json()
    print(f'$ {cmd}  -> code {result["code"]}')
    for line in result['stdout'].splitlines():
        print(f'  {line}')
    if result['code'] != 0:
        sys.exit(f'failed: {result["stderr"]}')
    return result['stdout']


session = post('/create_session', {
    'id': thread_id, 'workdir': 'temp', 'idle_timeout': 1800, 'timeout': 120, 'reuse': True,
}).json()
print(f'session {session["id"]} in {session["cwd"]} as {session["user"]}')

# A project with a virtualenv: its activate script sets VIRTUAL_ENV and puts
# .venv/bin first on PATH, as python3 -m venv's does.
run('mkdir -p app/.venv/bin && cd app'
    ' && printf \'%s\\n\' \'export VIRTUAL_ENV="$PWD/.venv"\' \'export PATH="$VIRTUAL_ENV/bin:$PATH"\' >.venv/bin/activate'
    ' && printf \'#!/bin/sh\\necho "tests passed in $PWD with $VIRTUAL_ENV"\\n\' >.venv/bin/run-tests'
    ' && chmod +x .venv/bin/run-tests')
# Three calls, one world: the cd and the activation last.
run('pwd')
run('source .venv/bin/activate')
run('echo "$VIRTUAL_ENV"; command -v run-tests')

# Streamed: /run_streaming in the same session, line by line.
response = http.post(f'{base_url}/run_streaming', json={'cmd': 'run-tests; echo done >&2', 'session': thread_id},
                     stream=True, timeout=(5, 60))
response.raise_for_status()
for line in response.iter_lines():
    if line.startswith(b'data: '):
        data = json.loads(line[6:])
        if 'stream' in data:
            print(f'  [{data["stream"]}] {data["data"]}')
        elif 'code' in data:
            print(f'  complete: code {data["code"]}')

sessions = http.get(f'{base_url}/list_sessions', timeout=10).json()['sessions']
print('sessions:', ', '.join(f'{s["id"]} (cwd {s["cwd"]}, {s["running"]} running)' for s in sessions))

post('/delete_session', {'id': thread_id})
gone = http.post(f'{base_url}/run', json={'cmd': 'true', 'session': thread_id}, timeout=10)
print(f'after delete_session: {gone.status_code} {gone.json()["error"]}')
