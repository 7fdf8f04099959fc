// An app of the installed `relay-client` package, in TypeScript: type-checked by tsc
// against the package's own relay-client.d.ts (found through its `exports`/`types`),
// then compiled and run by Node against a live relay (test_js_package.py).
import { RelayClient, RelayError, backoffDelay, isFinalCloseCode } from 'relay-client';
import type { CallType, ClientState, Hand, SessionJoined, Welcome } from 'relay-client';

/** Set by run.mjs: Node 20's WebSocket is the `ws` package. */
declare const RELAY_WS: unknown;

function client(url: string, uid: string, role: 'host' | 'participant' = 'participant'): RelayClient {
  return new RelayClient({ url, dev: { uid, name: uid.toUpperCase(), role }, WebSocket: RELAY_WS });
}

function nextEvent<T>(c: RelayClient, type: 'handraised' | 'callaccepted' | 'incomingcall'): Promise<T> {
  return new Promise((resolve) => c.addEventListener(type, (e) => resolve((e as unknown as { detail: T }).detail), { once: true }));
}

export async function main(url: string): Promise<string[]> {
  const lines: string[] = [];
  const alice = client(url, 'alice', 'host');
  const bob = client(url, 'bob');
  try {
    const welcome: Welcome = await alice.connect();
    lines.push(`welcome ${welcome.user.uid} ${welcome.resumed}`);
    await bob.connect();
    const joined: SessionJoined = await alice.joinSession('room');
    lines.push(`joined ${joined.session} ${joined.participants.map((p) => p.uid).join(',')}`);
    await bob.joinSession('room');
    const raised = nextEvent<Hand>(alice, 'handraised');
    alice.addEventListener('handraised', (e) => {
      const hand: Hand = e.detail; // typed by RelayEventMap
      lines.push(`handraised ${hand.uid}`);
    });
    await bob.raiseHand('room');
    await raised;
    const incoming = nextEvent<{ callId: string; callType: CallType }>(bob, 'incomingcall');
    const call = await alice.initiateCall('bob', 'video');
    const ring = await incoming;
    lines.push(`incoming ${ring.callType} ${ring.callId === call.callId}`);
    const accepted = nextEvent<{ uid: string }>(alice, 'callaccepted');
    await bob.acceptCall(call.callId);
    lines.push(`accepted ${(await accepted).uid}`);
    try {
      await bob.lowerAllHands('room');
    } catch (err) {
      if (err instanceof RelayError) lines.push(`error ${err.code}`);
    }
    const state: ClientState = alice.state;
    lines.push(`state ${state} ${alice.session('room')?.hands.map((h) => h.uid).join(',')}`);
    lines.push(`policy ${backoffDelay(3, { baseMs: 100 }, () => 0.5)} ${isFinalCloseCode(4501)}`);
  } finally {
    alice.close();
    bob.close();
  }
  return lines;
}

/** Never called: each line must fail to type-check, proving the types are applied. */
export function misuse(c: RelayClient): void {
  // @ts-expect-error callType is 'audio' | 'video'
  void c.initiateCall('bob', 'fax');
  // @ts-expect-error a session id is a string
  void c.joinSession(42);
  // @ts-expect-error a handraised detail has no callId
  c.addEventListener('handraised', (e) => e.detail.callId);
  // @ts-expect-error url is required
  void new RelayClient({ dev: { uid: 'a', name: 'A' } });
  // @ts-expect-error state is read-only
  c.state = 'open';
  // @ts-expect-error a push kind is 'apns-voip' | 'apns' | 'fcm' (no Web Push)
  void c.registerPushToken('t', 'webpush');
  // @ts-expect-error the environment is 'production' | 'sandbox'
  void c.registerPushToken('t', 'apns', 'development');
  // @ts-expect-error device is a boolean or an id string
  void new RelayClient({ url: 'ws://x', dev: { uid: 'a', name: 'A' }, device: 7 });
}
