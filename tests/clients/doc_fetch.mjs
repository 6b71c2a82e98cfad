// The API document's JavaScript example ("Stream Process Logs"), exactly as
// written there but for the address, the secret and the process id, which
// come from SANDBOX_URL, SANDBOX_SECRET and the first argument.
// (examples/logs_fetch.mjs is the same loop made safe for chunks that end
// mid-line; check_node_fetch.sh runs both.)
const processId = process.argv[2];
const response = await fetch(`${process.env.SANDBOX_URL}/process_logs_streaming?id=${processId}`, {
  method: 'GET',
  headers: {
    'Authorization': `Bearer ${process.env.SANDBOX_SECRET}`,
  }
});

const reader = response.body.getReader();
const decoder = new TextDecoder();

while (true) {
  const { done, value } = await reader.read();
  if (done) break;
  
  const text = decoder.decode(value);
  const lines = text.split('\n');
  
  for (const line of lines) {
    if (line.startsWith('data: ')) {
      const data = JSON.parse(line.substring(6));
      if (data.stream) {
        console.log(`[${data.stream}] ${data.data}`);
      }
    }
  }
}
