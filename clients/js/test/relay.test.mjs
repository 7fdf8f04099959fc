// The client against the real relay binary. Tests/integration/test_js_client.py starts
// the relays and passes their URLs:
//   RELAY_URL        defaults
//   RELAY_URL_SHORT  --grace 1500 --heartbeat-interval 300 --ring-timeout 600
//   RELAY_URL_IDLE   --idle-timeout 400
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { RelayClient } from '../relay-client.js';
import { loadWs, nextEvent, record, sleep } from './helpers.mjs';

const WebSocket = loadWs();
const { RELAY_URL, RELAY_URL_SHORT, RELAY_URL_IDLE } = process.env;
// Bounded tests: a hung one fails instead of holding the runner (and pytest) forever.
const live = { skip: RELAY_URL ? false : 'RELAY_URL not set (run through pytest)', timeout: 30000 };
const opened = new Set();
// A failed assertion must not leave clients open: their sockets and timers keep Node alive.
afterEach(() => { for (const c of opened) c.close(); opened.clear(); });
let serial = 0;
const room = () => `room-${process.pid}-${++serial}`;

/** A connected client; `sockets` lists its WebSockets so a test can kill one abruptly. */
async function connect(url, uid, role = 'participant', extra = {}) {
  const sockets = [];
  class Recorded extends WebSocket {
    constructor(...args) { super(...args); sockets.push(this); }
  }
  const c = new RelayClient({ url, dev: { uid, name: uid[0].toUpperCase() + uid.slice(1), role }, WebSocket: Recorded, ...extra });
  c.sockets = sockets;
  opened.add(c);
  await c.connect();
  return c;
}

test('every session and call event reaches both sides', live, async () => {
  const id = room();
  const alice = await connect(RELAY_URL, 'alice', 'host');
  const bob = await connect(RELAY_URL, 'bob');
  const joined = await alice.joinSession(id);
  assert.equal(joined.self.uid, 'alice');
  const bobJoined = nextEvent(alice, 'participantjoined', (d) => d.participant.uid === 'bob');
  const snapshot = await bob.joinSession(id);
  assert.deepEqual(snapshot.participants.map((p) => p.uid).sort(), ['alice', 'bob']);
  await bobJoined;

  const raised = nextEvent(alice, 'handraised', (d) => d.uid === 'bob');
  await bob.raiseHand(id);
  assert.equal((await raised).name, 'Bob');
  // Listen before acting: bob's socket may deliver the event before alice's reply is read.
  const aliceRaised = nextEvent(bob, 'handraised', (d) => d.uid === 'alice');
  await alice.raiseHand(id);
  await aliceRaised;
  assert.deepEqual(bob.session(id).hands.map((h) => h.uid), ['bob', 'alice'], 'one ordered queue (§7)');
  const lowered = nextEvent(bob, 'handlowered', (d) => d.uid === 'bob');
  await alice.lowerHand(id, 'bob');
  assert.equal((await lowered).reason, 'host');
  const cleared = nextEvent(bob, 'handscleared');
  await alice.lowerAllHands(id);
  assert.equal((await cleared).by, 'alice');
  assert.deepEqual(bob.session(id).hands, []);
  await assert.rejects(bob.lowerAllHands(id), (e) => e.code === 'forbidden');
  await assert.rejects(bob.sendMessage('elsewhere', 1), (e) => e.code === 'not_in_session');

  const message = nextEvent(bob, 'message');
  await alice.sendMessage(id, { emoji: '👍' });
  assert.deepEqual((await message).data, { emoji: '👍' });
  assert.equal((await alice.ping()).type, 'pong');
  await bob.setBackground(true);
  await bob.setBackground(false);

  // Accepted, then ended.
  const incoming = nextEvent(bob, 'incomingcall');
  const ringing = nextEvent(alice, 'callringing');
  const call = await alice.initiateCall('bob', 'video', { topic: 'demo' });
  const inc = await incoming;
  assert.equal(inc.callId, call.callId);
  assert.deepEqual(inc.metadata, { topic: 'demo' });
  assert.equal((await ringing).uid, 'bob');
  const accepted = nextEvent(alice, 'callaccepted');
  await bob.acceptCall(call.callId);
  assert.equal((await accepted).sessionId, call.sessionId);
  // Busy: a third user rings bob while he is in the call.
  const carol = await connect(RELAY_URL, 'carol');
  const busy = nextEvent(carol, 'callbusy');
  await carol.initiateCall('bob');
  assert.equal((await busy).uid, 'bob');
  const ended = nextEvent(alice, 'callended');
  await bob.endCall(call.callId);
  assert.equal((await ended).by, 'bob');

  // Rejected, cancelled, offline.
  let c = nextEvent(bob, 'incomingcall');
  const rejected = nextEvent(alice, 'callrejected');
  const call2 = await alice.initiateCall(['bob']);
  await c;
  await bob.rejectCall(call2.callId);
  assert.equal((await rejected).reason, 'declined');
  c = nextEvent(bob, 'incomingcall');
  const cancelled = nextEvent(bob, 'callcancelled');
  const call3 = await alice.initiateCall('bob');
  await c;
  await alice.cancelCall(call3.callId);
  assert.equal((await cancelled).reason, 'cancelled');
  const offline = nextEvent(alice, 'calloffline');
  const call4 = await alice.initiateCall('nobody-online');
  assert.equal((await offline).uid, 'nobody-online');
  await alice.cancelCall(call4.callId);

  // Removed by the host, then a plain leave.
  await carol.joinSession(id);
  const removed = nextEvent(carol, 'sessionleft');
  const carolLeft = nextEvent(alice, 'participantleft', (d) => d.uid === 'carol');
  await alice.removeParticipant(id, 'carol');
  assert.equal((await removed).reason, 'removed');
  assert.equal((await carolLeft).reason, 'removed');
  const bobLeft = nextEvent(alice, 'participantleft', (d) => d.uid === 'bob');
  const left = nextEvent(bob, 'sessionleft');
  await bob.leaveSession(id);
  assert.equal((await left).reason, 'left');
  assert.equal((await bobLeft).reason, 'left');
  assert.deepEqual(alice.session(id).participants.map((p) => p.uid), ['alice']);
  for (const x of [alice, bob, carol]) x.close();
});

test('an abrupt drop: reconnect, resume, every message once and in order', live, async () => {
  const id = room();
  const alice = await connect(RELAY_URL_SHORT, 'alice');
  const bob = await connect(RELAY_URL_SHORT, 'bob', 'participant', { backoff: { baseMs: 100, capMs: 200 } });
  await alice.joinSession(id);
  const start = (await bob.joinSession(id)).seq;
  const seen = record(bob, ['message', 'participantlost', 'participantrestored', 'connectionlost', 'reconnecting',
    'connectionrestored', 'sessionresumed']);
  const aliceSaw = record(alice, ['participantlost', 'participantrestored']);
  const seqs = [];
  bob.addEventListener('servermessage', (e) => { if (e.detail.session === id && e.detail.ts) seqs.push(e.detail.seq); });

  for (let i = 0; i < 30; i++) {
    if (i === 8) bob.sockets.at(-1).terminate(); // TCP ends without a close frame: lost (§5)
    await alice.sendMessage(id, i);
    await sleep(60); // under --message-rate 20 per second
  }
  if (!seen.some((e) => e.type === 'message' && e.detail.data === 29)) {
    await nextEvent(bob, 'message', (d) => d.data === 29).catch(() => {});
  }
  const data = seen.filter((e) => e.type === 'message').map((e) => e.detail.data);
  assert.deepEqual(data, [...Array(30).keys()], 'nothing lost, nothing twice');
  assert.deepEqual(seqs, seqs.map((_, i) => start + 1 + i), 'seq has no gap and no duplicate');
  const types = seen.map((e) => e.type).filter((t) => t !== 'message');
  assert.deepEqual(types.slice(0, 2), ['connectionlost', 'reconnecting']);
  assert.ok(types.includes('connectionrestored') && types.includes('sessionresumed'), types.join());
  assert.ok(types.includes('participantlost') && types.includes('participantrestored'), 'the replay has our own lost/restored');
  assert.deepEqual(aliceSaw.map((e) => `${e.type} ${e.detail.uid}`), ['participantlost bob', 'participantrestored bob']);
  assert.deepEqual(seen.find((e) => e.type === 'connectionrestored').detail, { resumed: true });
  alice.close();
  bob.close();
});

test('back after grace: welcome.resumed false, joined again with recovered: false', live, async () => {
  const id = room();
  const alice = await connect(RELAY_URL_SHORT, 'alice');
  // The first retry waits about 3 s, past the relay's 1.5 s grace.
  const bob = await connect(RELAY_URL_SHORT, 'bob', 'participant', { backoff: { baseMs: 3000, capMs: 3000 }, random: () => 0.999 });
  await alice.joinSession(id);
  await bob.joinSession(id);
  const timedOut = nextEvent(alice, 'participanttimedout', (d) => d.uid === 'bob', 8000);
  const rejoined = nextEvent(bob, 'sessionjoined', () => true, 10000);
  const restored = nextEvent(bob, 'connectionrestored', () => true, 10000);
  bob.sockets.at(-1).terminate();
  await timedOut;
  assert.deepEqual(await restored, { resumed: false });
  const snapshot = await rejoined;
  assert.equal(snapshot.recovered, false);
  assert.deepEqual(bob.session(id).participants.map((p) => p.uid).sort(), ['alice', 'bob']);
  alice.close();
  bob.close();
});

test('replaced by a newer connection (4509): the client stops', live, async () => {
  const bob = await connect(RELAY_URL, 'bob');
  await bob.joinSession(room());
  let retried = false;
  bob.addEventListener('reconnecting', () => { retried = true; });
  const closed = nextEvent(bob, 'closed');
  const other = new WebSocket(RELAY_URL, 'relay.v1', { handshakeTimeout: 8000 });
  opened.add({ close: () => other.terminate() });
  await new Promise((resolve, reject) => { other.on('open', resolve); other.on('error', reject); });
  other.send(JSON.stringify({ type: 'hello', dev: { uid: 'bob', name: 'Bob' }, resume: { token: bob.welcome.resumeToken, sessions: {} } }));
  assert.equal((await closed).code, 4509);
  await sleep(300);
  assert.equal(retried, false);
  assert.equal(bob.state, 'closed');
  other.close();
});

test('app-level pings at welcome.heartbeat.interval (§5)', live, async () => {
  const c = await connect(RELAY_URL_SHORT, 'pinger');
  assert.equal(c.welcome.heartbeat.interval, 300);
  const pongs = [];
  c.addEventListener('servermessage', (e) => { if (e.detail.type === 'pong') pongs.push(e.detail); });
  await nextEvent(c, 'servermessage', () => pongs.length >= 3, 3000);
  c.close();
});

test('ring timeout: callee cancelled "unanswered", caller callunanswered', live, async () => {
  const alice = await connect(RELAY_URL_SHORT, 'alice');
  const bob = await connect(RELAY_URL_SHORT, 'bob');
  const unanswered = nextEvent(alice, 'callunanswered');
  const cancelled = nextEvent(bob, 'callcancelled');
  await alice.initiateCall('bob');
  assert.equal((await unanswered).uid, 'bob');
  assert.equal((await cancelled).reason, 'unanswered');
  alice.close();
  bob.close();
});

test('alone too long: sessionidlewarning, then sessiontimedout', { ...live, skip: RELAY_URL_IDLE ? false : 'RELAY_URL_IDLE not set' }, async () => {
  const c = await connect(RELAY_URL_IDLE, 'alone');
  const id = room();
  const warning = nextEvent(c, 'sessionidlewarning');
  const timedOut = nextEvent(c, 'sessiontimedout');
  await c.joinSession(id);
  assert.equal((await warning).session, id);
  assert.equal((await timedOut).session, id);
  assert.equal(c.session(id), null);
  c.close();
});
