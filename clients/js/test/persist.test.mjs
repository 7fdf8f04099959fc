// Keeping the place across a reload (`persist`): a client dropped without a clean close
// and a new one made with the same storage resume (§9) against the real relay; the
// storage rules (what is written, when, and when it is forgotten) against the scripted one.
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { RelayClient } from '../relay-client.js';
import { fakeRelay, loadWs, nextEvent } from './helpers.mjs';

const WebSocket = loadWs();
const { RELAY_URL, RELAY_URL_SHORT } = process.env;
const live = { skip: RELAY_URL ? false : 'RELAY_URL not set (run through pytest)', timeout: 30000 };
const opened = new Set();
afterEach(() => { for (const c of opened) c.close(); opened.clear(); });
let serial = 0;
const room = () => `persist-${process.pid}-${++serial}`;

/** A storage hook over a Map; `async` answers with promises, as a database would. */
function memoryStore({ async = false } = {}) {
  const map = new Map();
  const log = [];
  const answer = (v) => (async ? new Promise((r) => setTimeout(() => r(v), 1)) : v);
  return {
    map, log,
    get: (k) => answer(map.get(k) ?? null),
    set: (k, v) => { log.push('set'); map.set(k, v); return answer(undefined); },
    remove: (k) => { log.push('remove'); map.delete(k); return answer(undefined); },
  };
}

function client(url, uid, extra = {}) {
  const c = new RelayClient({ url, dev: { uid, name: uid[0].toUpperCase() + uid.slice(1) }, WebSocket, ...extra });
  opened.add(c);
  return c;
}

async function joinedWithHand(url, uid, id, extra) {
  const c = client(url, uid, extra);
  await c.connect();
  await c.joinSession(id);
  await c.raiseHand(id);
  return c;
}

const handsOf = (c, id) => c.session(id).hands.map((h) => h.uid);

for (const async of [false, true]) {
  test(`a reloaded client resumes its place and its ringing call, with exact replay (${async ? 'async' : 'sync'} storage)`, live, async () => {
    const id = room();
    const store = memoryStore({ async });
    const alice = await joinedWithHand(RELAY_URL, 'alice', id);
    const bob = await joinedWithHand(RELAY_URL, 'bob', id, { persist: store });
    const carolRaised = nextEvent(bob, 'handraised', (d) => d.uid === 'carol');
    await joinedWithHand(RELAY_URL, 'carol', id);
    await carolRaised;
    assert.deepEqual(handsOf(bob, id), ['alice', 'bob', 'carol']);
    const seqBefore = bob.session(id).seq;

    // The reload: no close frame, no leave; the relay holds bob as lost (§8).
    const lost = nextEvent(alice, 'participantlost', (d) => d.uid === 'bob');
    await bob.suspend();
    opened.delete(bob);
    await lost;
    await alice.sendMessage(id, { n: 1 });
    await alice.sendMessage(id, { n: 2 });
    const { callId } = await alice.initiateCall('bob', 'audio');

    const again = client(RELAY_URL, 'bob', { persist: store });
    const replayed = [];
    again.addEventListener('servermessage', (e) => { if (e.detail.session === id && typeof e.detail.seq === 'number') replayed.push(e.detail); });
    const restoredForAlice = nextEvent(alice, 'participantrestored', (d) => d.uid === 'bob');
    const resumed = nextEvent(again, 'sessionresumed', (d) => d.session === id);
    const restored = nextEvent(again, 'connectionrestored');
    const ringing = nextEvent(again, 'incomingcall', (d) => d.callId === callId);
    const welcome = await again.connect();
    assert.equal(welcome.resumed, true, 'the stored token resumed (§9)');
    assert.deepEqual(await restored, { resumed: true, fromStorage: true });
    await resumed;
    await restoredForAlice;
    assert.equal((await ringing).from.uid, 'alice', 'the call that rang while it was gone (§4)');

    assert.deepEqual(handsOf(again, id), ['alice', 'bob', 'carol'], 'the hand kept its place');
    assert.deepEqual(again.sessionIds, [id]);
    const events = replayed.filter((m) => m.type !== 'session.resumed');
    assert.deepEqual(events.map((m) => m.seq), events.map((_, i) => seqBefore + 1 + i), 'every seq after the stored one, once, in order');
    assert.deepEqual(events.map((m) => m.type), ['participant.lost', 'message', 'message', 'participant.restored']);
    assert.deepEqual(events.filter((m) => m.type === 'message').map((m) => m.data.n), [1, 2]);
    assert.equal(again.session(id).seq, seqBefore + 4);
    assert.equal(again.session(id).participants.find((p) => p.uid === 'bob').status, 'connected');
  });
}

test('close() forgets the place: the next client starts afresh and bob has left', live, async () => {
  const id = room();
  const store = memoryStore();
  const alice = await joinedWithHand(RELAY_URL, 'alice', id);
  const bob = await joinedWithHand(RELAY_URL, 'bob', id, { persist: store });
  assert.ok(store.map.get('relay.resume'), 'the place is stored');
  const left = nextEvent(alice, 'participantleft', (d) => d.uid === 'bob');
  bob.close();
  await left;
  assert.equal(store.map.size, 0);
  const again = client(RELAY_URL, 'bob', { persist: store });
  const welcome = await again.connect();
  assert.equal(welcome.resumed, false);
  assert.deepEqual(again.sessionIds, []);
});

test('a place stored past grace: joined again with recovered: false, hand gone', live, async () => {
  const id = room();
  const store = memoryStore();
  const alice = await joinedWithHand(RELAY_URL_SHORT, 'alice', id);
  const bob = await joinedWithHand(RELAY_URL_SHORT, 'bob', id, { persist: store });
  const timedOut = nextEvent(alice, 'participanttimedout', (d) => d.uid === 'bob');
  await bob.suspend();
  opened.delete(bob);
  await timedOut;
  const again = client(RELAY_URL_SHORT, 'bob', { persist: store });
  const joined = nextEvent(again, 'sessionjoined', (d) => d.session === id);
  const welcome = await again.connect();
  assert.equal(welcome.resumed, false);
  assert.equal((await joined).recovered, false, '§18.5: rejoined, rebuilt from the snapshot');
  assert.deepEqual(handsOf(again, id), ['alice']);
});

// MARK: storage rules, against the scripted relay

function fakeClient(server, store, extra = {}) {
  const c = new RelayClient({ url: 'ws://fake/v1/ws', dev: { uid: 'me', name: 'Me' }, WebSocket: server.WebSocket, persist: store, ...extra });
  opened.add(c);
  return c;
}

test('session events are written coalesced; token and membership at once', { timeout: 10000 }, async () => {
  const server = fakeRelay();
  const store = memoryStore();
  const c = fakeClient(server, store, { persistDelayMs: 50 });
  await c.connect();
  assert.deepEqual(store.log, ['set'], 'the token, at welcome');
  await c.joinSession('room');
  assert.equal(store.log.length, 2, 'the joined session, at once');
  const socket = server.last();
  const last = nextEvent(c, 'message', (d) => d.seq === 30);
  for (let seq = 2; seq <= 30; seq++) socket.push({ type: 'message', session: 'room', seq, ts: seq, from: 'x', data: seq });
  assert.equal(store.log.length, 2, 'no write per event');
  await last;
  await new Promise((r) => setTimeout(r, 120));
  assert.equal(store.log.length, 3, 'one write for the burst');
  const stored = JSON.parse(store.map.get('relay.resume'));
  assert.equal(stored.token, 'rt1');
  assert.deepEqual(stored.sessions.map((s) => [s.session, s.seq]), [['room', 30]]);
});

test('a stored place is sent as hello.resume; another relay\'s or a broken one is ignored', { timeout: 10000 }, async () => {
  const server = fakeRelay();
  const store = memoryStore();
  const record = { v: 1, url: 'ws://fake/v1/ws', uid: 'me', token: 'rt-old', sessions: [
    { session: 'room', seq: 7, self: { uid: 'me' }, participants: [{ uid: 'me', name: 'Me', status: 'connected' }], hands: [{ uid: 'me', name: 'Me', raisedAt: 1 }] }] };
  store.map.set('relay.resume', JSON.stringify(record));
  const c = fakeClient(server, store);
  const welcome = await c.connect();
  assert.deepEqual(server.last().sent[0].resume, { token: 'rt-old', sessions: { room: 7 } });
  assert.equal(welcome.resumed, true);
  assert.deepEqual(c.session('room').hands.map((h) => h.uid), ['me']);
  c.close();

  for (const bad of ['{not json', JSON.stringify({ ...record, url: 'ws://elsewhere/v1/ws' }), JSON.stringify({ ...record, sessions: [{ session: 1 }] })]) {
    store.map.set('relay.resume', bad);
    const fresh = fakeClient(server, store);
    await fresh.connect();
    assert.equal(server.last().sent[0].resume, undefined, bad);
    assert.deepEqual(fresh.sessionIds, []);
    fresh.close();
  }
});

test('a stored place of another user is not rejoined', { timeout: 10000 }, async () => {
  const server = fakeRelay();
  server.forgetResume = true;
  const store = memoryStore();
  store.map.set('relay.resume', JSON.stringify({ v: 1, url: 'ws://fake/v1/ws', uid: 'someone-else', token: 'rt-x',
    sessions: [{ session: 'theirs', seq: 3, self: {}, participants: [], hands: [] }] }));
  const c = fakeClient(server, store);
  await c.connect();
  assert.deepEqual(c.sessionIds, []);
  assert.ok(!server.last().sent.some((m) => m.type === 'session.join'));
});

test('replaced (4509) forgets the place; persist: true needs sessionStorage', { timeout: 10000 }, async () => {
  const server = fakeRelay();
  const store = memoryStore();
  const c = fakeClient(server, store);
  await c.connect();
  assert.equal(store.map.size, 1);
  const closed = nextEvent(c, 'closed');
  server.last().drop(4509, 'replaced');
  await closed;
  assert.equal(store.map.size, 0);
  assert.throws(() => new RelayClient({ url: 'ws://x', dev: { uid: 'a', name: 'A' }, WebSocket, persist: true }), TypeError);
  assert.throws(() => new RelayClient({ url: 'ws://x', dev: { uid: 'a', name: 'A' }, WebSocket, persist: { get() {} } }), TypeError);
});

test('suspend() during an async write in flight still stores the latest place', { timeout: 10000 }, async () => {
  const server = fakeRelay();
  const map = new Map();
  const gates = [];
  // Every write is held until the test lets it finish: one write in flight at a time.
  const store = { get: (k) => map.get(k) ?? null, set: (k, v) => { map.set(k, v); return new Promise((r) => gates.push(r)); }, remove: (k) => { map.delete(k); } };
  const c = fakeClient(server, store);
  await c.connect();
  await c.joinSession('room');
  server.last().push({ type: 'message', session: 'room', seq: 2, ts: 2, from: 'x', data: 2 });
  assert.equal(gates.length, 1, 'the token write holds the later ones back');
  assert.deepEqual(JSON.parse(map.get('relay.resume')).sessions, []);
  const done = c.suspend();
  opened.delete(c);
  gates.shift()();
  while (gates.length === 0) await new Promise((r) => setTimeout(r, 1));
  gates.shift()();
  await done;
  assert.deepEqual(JSON.parse(map.get('relay.resume')).sessions.map((s) => [s.session, s.seq]), [['room', 2]]);
});
