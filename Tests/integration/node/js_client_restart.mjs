// The JavaScript client across a relay restart: drained with 1001 (§13), the relay is
// gone for a while (connection refused: 1006), then back without the old state, so
// the resume fails and the client joins again with recovered: false (§9).
// Usage: node js_client_restart.mjs ws://127.0.0.1:PORT/v1/ws
// Prints "ready" once joined, then one JSON line per client event; exits 0 after the
// re-join, 2 on the overall deadline. Driven by test_js_client.py.
import { createRequire } from 'node:module';
import { RelayClient } from '../../../clients/js/relay-client.js';

const WebSocket = createRequire(import.meta.url)(process.env.WS_MODULE || '/usr/share/nodejs/ws');
setTimeout(() => { console.log(JSON.stringify({ fatal: 'overall deadline' })); process.exit(2); }, 30000).unref();

const client = new RelayClient({
  url: process.argv[2], dev: { uid: 'ada', name: 'Ada' }, WebSocket, backoff: { baseMs: 100, capMs: 800 },
});
await client.connect();
await client.joinSession('restart');
console.log('ready');
for (const type of ['connectionlost', 'reconnecting', 'connectionrestored', 'sessionjoined', 'closed']) {
  client.addEventListener(type, (e) => console.log(JSON.stringify({ ...e.detail, type, self: undefined, participants: undefined })));
}
client.addEventListener('sessionjoined', (e) => {
  if (e.detail.recovered !== false) return;
  client.close();
  process.exit(0);
});
