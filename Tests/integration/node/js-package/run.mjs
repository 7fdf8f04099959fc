// Runs the compiled consumer against RELAY_URL: `ws` (Debian's node-ws through
// NODE_PATH) as the WebSocket, then one JSON line of results. Also checks what the
// package exports: its package.json, and no deep import of its files.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
globalThis.RELAY_WS = require('ws');
const manifest = require('relay-client/package.json');
let deep = 'allowed';
try {
  await import('relay-client/relay-client.js');
} catch (err) {
  deep = err.code;
}
const { main } = await import('./out/consumer.js');
const lines = await main(process.argv[2]);
console.log(JSON.stringify({ version: manifest.version, deep, lines }));
