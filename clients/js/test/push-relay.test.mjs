// Push registration against the real relay (§4 hello.device, §9a). Run through
// Tests/integration/test_js_client.py, which passes RELAY_URL (a dev-mode relay).
import { afterEach, test } from 'node:test';
import assert from 'node:assert/strict';
import { RelayClient } from '../relay-client.js';
import { loadWs } from './helpers.mjs';

const WebSocket = loadWs();
const { RELAY_URL } = process.env;
const live = { skip: RELAY_URL ? false : 'RELAY_URL not set (run through pytest)', timeout: 30000 };
const opened = new Set();
afterEach(() => { for (const c of opened) c.close(); opened.clear(); });

async function connect(uid, extra = {}) {
  const c = new RelayClient({ url: RELAY_URL, dev: { uid, name: uid }, WebSocket, ...extra });
  opened.add(c);
  await c.connect();
  return c;
}

test('a device registers, replaces and unregisters its tokens', live, async () => {
  const phone = await connect(`bob-${process.pid}`, { device: 'bob-phone.1' });
  const voip = 'ab'.repeat(32);
  assert.equal((await phone.registerPushToken(voip, 'apns-voip', 'sandbox')).type, 'ok');
  assert.equal((await phone.registerPushToken('cd'.repeat(32), 'apns-voip')).type, 'ok', 'a new token of one kind replaces the old');
  assert.equal((await phone.registerPushToken('fcm-token:1', 'fcm')).type, 'ok');
  assert.equal((await phone.unregisterPushToken('fcm-token:1')).type, 'ok');
  assert.equal((await phone.unregisterPushToken('cd'.repeat(32))).type, 'ok');
});

test('bad tokens and a connection without a device are refused with bad_request', live, async () => {
  const phone = await connect(`carol-${process.pid}`, { device: true });
  for (const [token, kind] of [['zz', 'apns'], ['abc', 'apns-voip'], ['', 'fcm'], ['ab'.repeat(32), 'webpush']]) {
    await assert.rejects(phone.registerPushToken(token, kind), (e) => e.code === 'bad_request', `${kind} ${token}`);
  }
  const anonymous = await connect(`dave-${process.pid}`);
  await assert.rejects(anonymous.registerPushToken('ab'.repeat(32), 'apns-voip'), (e) => e.code === 'bad_request');
});
