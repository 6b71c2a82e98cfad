#!/usr/bin/env python3
"""Follow a background process's logs with requests: the API document's Python example.

    SANDBOX_SECRET=<secret> python3 examples/logs.py PROCESS_ID

SANDBOX_URL defaults to http://127.0.0.1:3030 (`make run`). Needs the requests
package (Debian: apt-get install python3-requests). Prints "[stdout] line" or
"[stderr] line" for every line, retained ones first, and returns when the
process has ended. The ": ping" comments that idle streams carry are skipped
like every other line that does not start with "data: ".
"""
import json
import os
import sys

import requests

base_url = os.environ.get('SANDBOX_URL', 'http://127.0.0.1:3030')
secret = os.environ.get('SANDBOX_SECRET')
if not secret or len(sys.argv) != 2:
    sys.exit('usage: SANDBOX_SECRET=<secret> python3 logs.py PROCESS_ID')
process_id = sys.argv[1]

response = requests.get(
    f'{base_url}/process_logs_streaming?id={process_id}',
    headers={
        'Authorization': f'Bearer {secret}'
    },
    stream=True,
    # Not in the document: connect within 5 s, and give up if nothing (not even
    # a ping, sent every 15 s by default) arrives for 60 s.
    timeout=(5, 60),
)
response.raise_for_status()  # not in the document: a wrong secret gives 401

# The document's loop, as it is. A "data: " line holds one line of JSON.
for line in response.iter_lines():
    if line:
        line = line.decode('utf-8')
        if line.startswith('data: '):
            data = json.loads(line[6:])
            if 'stream' in data:
                print(f"[{data['stream']}] {data['data']}", flush=True)
            elif 'error' in data:  # not in the document: e.g. process not found
                sys.exit(data['error'])
