// Reconnect policy, backoff, liveness and seq rules of the client, against a scripted
// in-process relay (helpers.mjs): close codes and silences a real relay cannot be asked for.
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { RelayClient, RelayError, backoffDelay, isFinalCloseCode } from '../relay-client.js';
import { fakeRelay, nextEvent, sleep } from './helpers.mjs';

const dev = { uid: 'me', name: 'Me' };

const opened = new Set();
afterEach(() => { for (const c of opened) c.close(); opened.clear(); });

function clientOn(server, extra = {}) {
  return track(new RelayClient({ url: 'ws://fake/v1/ws', dev, WebSocket: server.WebSocket, backoff: { baseMs: 1, capMs: 1 }, ...extra }));
}

function track(c) {
  opened.add(c);
  return c;
}

async function joined(server, extra) {
  const c = clientOn(server, extra);
  await c.connect();
  await c.joinSession('room');
  return c;
}

test('backoff is full jitter within [0, min(cap, base * 2^attempt))', { timeout: 10000 }, () => {
  const backoff = { baseMs: 500, capMs: 20000 };
  for (let attempt = 0; attempt < 40; attempt++) {
    const ceiling = Math.min(20000, 500 * 2 ** attempt);
    assert.equal(backoffDelay(attempt, backoff, () => 0), 0);
    const top = backoffDelay(attempt, backoff, () => 0.999999);
    assert.ok(top < ceiling && top >= ceiling * 0.999 - 1, `attempt ${attempt}: ${top} vs ${ceiling}`);
    for (let i = 0; i < 50; i++) {
      const d = backoffDelay(attempt, backoff);
      assert.ok(d >= 0 && d < ceiling);
    }
  }
  // Defaults: base 500 ms, cap 20 000 ms.
  assert.equal(backoffDelay(3, undefined, () => 0.5), 2000);
  assert.equal(backoffDelay(12, undefined, () => 0.5), 10000);
});

test('the client grows its delays per failed attempt and resets after a welcome', { timeout: 10000 }, async () => {
  const server = fakeRelay();
  const c = await joined(server, { backoff: { baseMs: 10, capMs: 80 }, random: () => 0.5 });
  const delays = [];
  c.addEventListener('reconnecting', (e) => delays.push(e.detail.delayMs));
  server.refuse = true;
  server.last().drop(1006);
  while (delays.length < 6) await sleep(5);
  server.refuse = false;
  await nextEvent(c, 'connectionrestored');
  assert.deepEqual(delays.slice(0, 6), [5, 10, 20, 40, 40, 40]);
  server.last().drop(1011);
  await nextEvent(c, 'connectionrestored');
  assert.equal(delays.at(-1), 5, 'attempts count from 0 again after a welcome');
  c.close();
});

for (const code of [1001, 1006, 1011, 1012, 4000, 4008, 4029, 4499]) {
  test(`close ${code} reconnects and resumes with the last seq`, { timeout: 10000 }, async () => {
    const server = fakeRelay();
    const c = await joined(server);
    server.last().push({ type: 'participant.lost', session: 'room', seq: 2, ts: 1, uid: 'x' });
    const lost = nextEvent(c, 'connectionlost');
    const restored = nextEvent(c, 'connectionrestored');
    server.last().drop(code);
    assert.deepEqual(await lost, { code, reason: '', willReconnect: true });
    assert.deepEqual(await restored, { resumed: true });
    const hello = server.last().sent[0];
    assert.deepEqual(hello.resume, { token: 'rt1', sessions: { room: 2 } });
    assert.equal(c.state, 'open');
    c.close();
  });
}

for (const code of [1000, 4500, 4501, 4509, 4999]) {
  test(`close ${code} stops: no reconnect`, { timeout: 10000 }, async () => {
    assert.ok(isFinalCloseCode(code));
    const server = fakeRelay();
    const c = await joined(server);
    let retried = false;
    c.addEventListener('reconnecting', () => { retried = true; });
    const closed = nextEvent(c, 'closed');
    server.last().drop(code, 'bye');
    assert.deepEqual(await closed, { code, reason: 'bye' });
    await sleep(30);
    assert.equal(retried, false);
    assert.equal(server.sockets.length, 1);
    assert.equal(c.state, 'closed');
  });
}

test('no pong within the heartbeat timeout: the client drops the socket and resumes', { timeout: 10000 }, async () => {
  const server = fakeRelay({ heartbeat: { interval: 20, timeout: 40 } });
  const c = await joined(server);
  server.answerPings = false;
  const lost = await nextEvent(c, 'connectionlost', () => true, 2000);
  assert.equal(lost.code, 4000);
  assert.equal(server.sockets[0].closedWith, 4000);
  server.answerPings = true;
  await nextEvent(c, 'connectionrestored');
  assert.ok(server.sockets[0].sent.some((m) => m.type === 'ping'), 'app-level pings (§5)');
  c.close();
});

test('a seq gap reconnects and resumes from the last seq; duplicates are dropped', { timeout: 10000 }, async () => {
  const server = fakeRelay();
  const c = await joined(server);
  const raised = [];
  c.addEventListener('handraised', (e) => raised.push(e.detail.seq));
  const ev = (seq) => ({ type: 'hand.raised', session: 'room', seq, ts: 1, uid: `u${seq}`, name: 'U', raisedAt: 1 });
  server.last().push(ev(2));
  server.last().push(ev(2));
  server.last().push(ev(3));
  const restored = nextEvent(c, 'connectionrestored');
  server.last().push(ev(5));
  await restored;
  assert.deepEqual(raised, [2, 3]);
  assert.deepEqual(server.last().sent[0].resume.sessions, { room: 3 });
  assert.deepEqual(c.session('room').hands.map((h) => h.uid), ['u2', 'u3']);
  c.close();
});

test('welcome.resumed false: the client joins again and says recovered: false', { timeout: 10000 }, async () => {
  const server = fakeRelay();
  const c = await joined(server);
  server.forgetResume = true;
  const rejoined = nextEvent(c, 'sessionjoined');
  server.last().drop(1006);
  const detail = await rejoined;
  assert.equal(detail.recovered, false);
  assert.ok(server.last().sent.some((m) => m.type === 'session.join' && m.session === 'room'));
  c.close();
});

test('errors carry the protocol code; commands fail fast when not connected', { timeout: 10000 }, async () => {
  const server = fakeRelay();
  const c = await joined(server);
  server.errors.set('hand.lower_all', 'forbidden');
  await assert.rejects(c.lowerAllHands('room'), (e) => e instanceof RelayError && e.code === 'forbidden');
  server.answer = () => {}; // silence: the next command is in flight when the socket drops
  const pending = c.raiseHand('room');
  await sleep(5);
  server.last().drop(1006);
  await assert.rejects(pending, (e) => e.code === 'connection_lost');
  c.close();
  await assert.rejects(c.raiseHand('room'), (e) => e.code === 'not_connected');
});

test('visibilitychange sends client.background (§5)', { timeout: 10000 }, async () => {
  const doc = Object.assign(new EventTarget(), { hidden: false });
  globalThis.document = doc;
  try {
    const server = fakeRelay();
    const c = await joined(server);
    doc.hidden = true;
    doc.dispatchEvent(new Event('visibilitychange'));
    doc.hidden = false;
    doc.dispatchEvent(new Event('visibilitychange'));
    const sent = server.last().sent.filter((m) => m.type === 'client.background').map((m) => m.background);
    assert.deepEqual(sent, [true, false]);
    c.close();
  } finally {
    delete globalThis.document;
  }
});

test('no welcome in time: the first connect() fails, a reconnect tries again', { timeout: 10000 }, async () => {
  const server = fakeRelay();
  const silent = server.answer;
  server.answer = (socket, m) => (m.type === 'hello' ? undefined : silent(socket, m));
  const c = clientOn(server, { commandTimeoutMs: 50 });
  await assert.rejects(c.connect(), (e) => e.code === 'connection_lost');
  assert.equal(c.state, 'closed');
  server.answer = silent;
  const d = await joined(server, { commandTimeoutMs: 50 });
  server.answer = (socket, m) => (m.type === 'hello' ? undefined : silent(socket, m));
  const retried = nextEvent(d, 'reconnecting', (x) => x.code === 4000);
  server.last().drop(1006);
  await retried;
  server.answer = silent;
  await nextEvent(d, 'connectionrestored');
});
