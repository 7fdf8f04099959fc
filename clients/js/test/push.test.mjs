// Push support of the client (§4 hello.device, §9a): the device id it sends and keeps,
// and the registration commands as they go on the wire, against the scripted relay of
// helpers.mjs. Registration against the real relay is in relay.test.mjs.
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { RelayClient, isValidDeviceId, persistentDeviceId } from '../relay-client.js';
import { fakeRelay } from './helpers.mjs';

const dev = { uid: 'me', name: 'Me' };
const opened = new Set();
afterEach(() => { for (const c of opened) c.close(); opened.clear(); });

function clientOn(server, extra = {}) {
  const c = new RelayClient({ url: 'ws://fake/v1/ws', dev, WebSocket: server.WebSocket, ...extra });
  opened.add(c);
  return c;
}

/** A localStorage stand-in: what a reloaded page finds again. */
function storage() {
  const map = new Map();
  return { getItem: (k) => (map.has(k) ? map.get(k) : null), setItem: (k, v) => map.set(k, String(v)), map };
}

test('device ids follow §4: 1-128 of [A-Za-z0-9._:-]', () => {
  for (const ok of ['a', 'iPhone-15.A:b_c', 'x'.repeat(128)]) assert.ok(isValidDeviceId(ok), ok);
  for (const bad of ['', 'x'.repeat(129), 'with space', 'é', 'a/b', null, 7]) assert.ok(!isValidDeviceId(bad), String(bad));
});

test('a generated device id is kept in storage and found again after a reload', () => {
  const store = storage();
  const first = persistentDeviceId(store);
  assert.match(first, /^[0-9a-f]{32}$/);
  assert.equal(store.map.get('relay.device'), first);
  assert.equal(persistentDeviceId(store), first, 'the same page, reloaded');
  assert.notEqual(persistentDeviceId(storage()), first, 'another browser profile is another device');
  store.map.set('relay.device', 'not valid!');
  assert.notEqual(persistentDeviceId(store), 'not valid!', 'a damaged entry is replaced');
});

test('without storage the id lives in memory, one per process', () => {
  const broken = { getItem() { throw new Error('denied'); }, setItem() { throw new Error('denied'); } };
  const a = persistentDeviceId(null);
  assert.equal(persistentDeviceId(null), a);
  assert.equal(persistentDeviceId(broken), a);
});

test('hello carries the device only when asked to (opt-in)', async () => {
  const server = fakeRelay();
  const plain = clientOn(server);
  await plain.connect();
  assert.equal(plain.deviceId, null);
  assert.equal('device' in server.last().sent[0], false);

  const own = clientOn(server, { device: 'kitchen-tablet' });
  await own.connect();
  assert.equal(server.last().sent[0].device, 'kitchen-tablet');

  const generated = clientOn(server, { device: true });
  await generated.connect();
  assert.ok(isValidDeviceId(generated.deviceId));
  assert.equal(server.last().sent[0].device, generated.deviceId);
  assert.throws(() => clientOn(server, { device: 'no spaces allowed' }), TypeError);
});

test('the device is sent again with every reconnecting hello', async () => {
  const server = fakeRelay();
  const c = clientOn(server, { device: 'd1', backoff: { baseMs: 1, capMs: 1 } });
  await c.connect();
  const first = server.last();
  const restored = new Promise((r) => c.addEventListener('connectionrestored', r, { once: true }));
  first.drop(1006);
  await restored;
  const hello = server.last().sent[0];
  assert.notEqual(server.last(), first);
  assert.equal(hello.device, 'd1');
  assert.ok(hello.resume, 'a resume hello');
});

test('push.register and push.unregister as §9a spells them', async () => {
  const server = fakeRelay();
  const c = clientOn(server, { device: 'd1' });
  await c.connect();
  await c.registerPushToken('ab'.repeat(32), 'apns-voip');
  await c.registerPushToken('cd'.repeat(32), 'apns', 'sandbox');
  await c.registerPushToken('fcm-token:1', 'fcm', 'sandbox');
  await c.unregisterPushToken('fcm-token:1');
  const sent = server.last().sent.filter((m) => m.type.startsWith('push.')).map(({ id, ...m }) => m);
  assert.deepEqual(sent, [
    { type: 'push.register', token: 'ab'.repeat(32), kind: 'apns-voip' },
    { type: 'push.register', token: 'cd'.repeat(32), kind: 'apns', environment: 'sandbox' },
    { type: 'push.register', token: 'fcm-token:1', kind: 'fcm' },
    { type: 'push.unregister', token: 'fcm-token:1' },
  ]);
});

test('a refused registration rejects with the relay\'s code', async () => {
  const server = fakeRelay();
  server.errors.set('push.register', 'bad_request');
  const c = clientOn(server);
  await c.connect();
  await assert.rejects(c.registerPushToken('zz', 'apns'), (e) => e.code === 'bad_request');
});
