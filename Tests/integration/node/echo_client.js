'use strict';
// Interop check of the relay's /v1/echo with Node's `ws` client.
// Usage: node echo_client.js ws://127.0.0.1:PORT/v1/echo [maxSize]
// Prints one JSON line per check; exits 0 when all pass, 1 on a failed check,
// 2 on the overall deadline. Driven by test_ws_interop.py.
const WebSocket = require(process.env.WS_MODULE || '/usr/share/nodejs/ws');
const crypto = require('crypto');

const url = process.argv[2];
const maxSize = Number(process.argv[3] || 65536);
const DEADLINE_MS = Number(process.env.DEADLINE_MS || 20000);
const STEP_MS = 5000;

setTimeout(() => { console.log(JSON.stringify({ fatal: 'overall deadline' })); process.exit(2); }, DEADLINE_MS).unref();

function report(name, ok, detail) {
  console.log(JSON.stringify({ check: name, ok, detail: detail || '' }));
  if (!ok) process.exitCode = 1;
}

function withTimeout(promise, what) {
  let timer;
  const t = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error('timeout: ' + what)), STEP_MS); });
  return Promise.race([promise, t]).finally(() => clearTimeout(timer));
}

function open() {
  return withTimeout(new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { maxPayload: 64 * 1024 * 1024 });
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error('HTTP ' + res.statusCode)));
  }), 'open');
}

function nextMessage(ws) {
  return withTimeout(new Promise((resolve, reject) => {
    const onClose = (code) => reject(new Error('closed with ' + code));
    ws.once('close', onClose);
    ws.once('message', (data, isBinary) => { ws.off('close', onClose); resolve({ data, isBinary }); });
  }), 'message');
}

function payload(n, binary) {
  if (binary) return crypto.randomBytes(n);
  // Multi-byte characters included; padded with ASCII to exactly n bytes.
  const unit = 'abcdefghij0123456789 \u00fc\u20ac\u{1d11e}';  // 21 + 2 + 3 + 4 = 30 bytes
  const whole = Math.floor(n / 30);
  return unit.repeat(whole) + 'x'.repeat(n - whole * 30);
}

async function echoCheck(ws, name, data, binary, sendFn) {
  const got = nextMessage(ws);
  if (sendFn) sendFn(); else ws.send(data, { binary });
  const { data: echoed, isBinary } = await got;
  const expected = Buffer.isBuffer(data) ? data : Buffer.from(data, 'utf8');
  report(name, isBinary === binary && Buffer.compare(Buffer.from(echoed), expected) === 0,
    `len ${echoed.length}/${expected.length} binary ${isBinary}`);
}

async function main() {
  const ws = await open();
  report('no extension negotiated', ws.extensions === '', JSON.stringify(ws.extensions));
  const small = [0, 1, 125, 126, 65535, 65536].filter((n) => n <= maxSize);
  for (const binary of [false, true]) {
    for (const n of small) {
      await echoCheck(ws, `${binary ? 'binary' : 'text'} ${n}`, payload(n, binary), binary);
    }
  }
  // Fragmented send: three frames, one message.
  const parts = ['frag-one ', 'frag-two \u20ac ', 'frag-three'];
  await echoCheck(ws, 'fragmented text', parts.join(''), false, () => {
    parts.forEach((p, i) => ws.send(p, { fin: i === parts.length - 1 }));
  });
  // Ping with payload → pong with the same payload.
  const pingData = Buffer.from('node-ping-\u00fc');
  const pong = withTimeout(new Promise((resolve) => ws.once('pong', resolve)), 'pong');
  ws.ping(pingData);
  const pongData = await pong;
  report('ping/pong payload', Buffer.compare(pongData, pingData) === 0, pongData.toString());
  // Close code round trip.
  const closed = withTimeout(new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason }))), 'close');
  ws.close(4000, 'node bye');
  const { code, reason } = await closed;
  report('close code echoed', code === 4000, `code ${code} reason ${reason}`);
  // Large messages on a second connection (each on its own so one failure
  // does not hide the other), closed with 1000.
  for (const binary of [false, true]) {
    const n = 1048576;
    if (n > maxSize) continue;
    const name = `${binary ? 'binary' : 'text'} ${n}`;
    const big = await open();
    try {
      await echoCheck(big, name, payload(n, binary), binary);
    } catch (err) {
      report(name, false, String(err));
      continue;
    }
    const closedBig = withTimeout(new Promise((resolve) => big.once('close', (c) => resolve(c))), 'close big');
    big.close(1000);
    const codeBig = await closedBig;
    report(`close 1000 echoed after ${name}`, codeBig === 1000, `code ${codeBig}`);
  }
}

main().then(() => {
  console.log(JSON.stringify({ done: true }));
  process.exit(process.exitCode || 0);
}, (err) => {
  console.log(JSON.stringify({ fatal: String(err && err.stack || err) }));
  process.exit(1);
});
