#!/usr/bin/env python3
"""Drive a code context with requests, as a notebook front-end does.

    SANDBOX_SECRET=<secret> python3 examples/notebook.py

SANDBOX_URL defaults to http://127.0.0.1:3030 (`make run`). Needs the requests
package (Debian: apt-get install python3-requests).

It creates a Python context and runs cells in it, each streamed as it runs:
a variable set in one cell is used in the next, a cell prints before it
sleeps (the text arrives before the sleep ends), an exception leaves the
context alive, and a cell that ignores SIGINT is stopped by its timeout with
its state lost, which the next call, sent with expected_generation, learns
from a 409 rather than running on an empty interpreter.
"""
import json
import os
import sys
import time

import requests

base_url = os.environ.get('SANDBOX_URL', 'http://127.0.0.1:3030')
http = requests.Session()
http.headers['Authorization'] = f"Bearer {os.environ['SANDBOX_SECRET']}"


def post(path, body, **kw):
    response = http.post(f'{base_url}{path}', json=body, timeout=60, **kw)
    if response.status_code >= 400:
        sys.exit(f'{path}: {response.status_code} {response.json()["error"]}')
    return response


def cell(ctx, code, **opts):
    """Runs code in ctx, printing its events as they come; returns complete."""
    print(f'In [{code.splitlines()[0]}]')
    body = {'context': ctx['id'], 'code': code, 'expected_generation': ctx['generation'], **opts}
    response = http.post(f'{base_url}/run_code', json=body, stream=True, timeout=60)
    if response.status_code == 409:
        print(f'  409 {response.json()}')
        return None
    response.raise_for_status()
    start, event = time.monotonic(), None
    for line in response.iter_lines(decode_unicode=True):
        if line.startswith('event: '):
            event = line[len('event: '):]
        elif line.startswith('data: '):
            data = json.loads(line[len('data: '):])
            if event in ('stdout', 'stderr'):
                late = ' (after the sleep!)' if time.monotonic() - start > 1 else ''
                print(f'  [{event}] {data["data"]!r}{late}')
            elif event in ('result', 'display'):
                print(f'  [{event}] {data["data"]["text/plain"]}')
            elif event == 'error':
                print(f'  [error] {data["name"]}: {data["value"]}')
            elif event == 'complete':
                print(f'  complete: {data["status"]}, state_lost={data["state_lost"]}, generation {data["generation"]}')
                ctx['generation'] = data['generation'] if not data['state_lost'] else ctx['generation']
                return data
    return None


ctx = post('/create_context', {'language': 'python'}).json()
try:
    cell(ctx, 'x = 41')
    cell(ctx, 'x + 1')
    cell(ctx, "import time\nprint('thinking', end='')\ntime.sleep(2)")
    cell(ctx, '1 / 0')
    cell(ctx, 'x')
    cell(ctx, 'while True:\n    try: time.sleep(1)\n    except KeyboardInterrupt: pass', timeout=1)
    cell(ctx, 'x')  # refused: the context was restarted since
finally:
    post('/delete_context', {'id': ctx['id']})
