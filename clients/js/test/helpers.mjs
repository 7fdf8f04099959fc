// Shared by the client tests: the `ws` package (Debian's node-ws), event waiting, and a
// scripted in-process WebSocket for what a real relay cannot be made to do on demand.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** `ws` from NODE_PATH or npm, else Debian's copy. */
export function loadWs() {
  try {
    return require('ws');
  } catch {
    return require('/usr/share/nodejs/ws');
  }
}

/** The next `type` event whose detail matches, or a rejection after `ms`. */
export function nextEvent(client, type, match = () => true, ms = 8000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      client.removeEventListener(type, on);
      reject(new Error(`no ${type} within ${ms} ms`));
    }, ms);
    function on(e) {
      if (!match(e.detail)) return;
      clearTimeout(timer);
      client.removeEventListener(type, on);
      resolve(e.detail);
    }
    client.addEventListener(type, on);
  });
}

/** Records every listed event type as {type, detail}, in order. */
export function record(client, types) {
  const seen = [];
  for (const type of types) client.addEventListener(type, (e) => seen.push({ type, detail: e.detail }));
  return seen;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * A scripted relay behind a fake WebSocket constructor. `server.sockets` lists every
 * socket the client opened; `server.answer(socket, msg)` decides replies (defaults:
 * welcome for hello, pong for ping, ok for anything else, session.joined after a join).
 */
export function fakeRelay({ heartbeat = { interval: 10000, timeout: 15000 } } = {}) {
  const server = { sockets: [], answerPings: true, refuse: false, seq: new Map(), errors: new Map() };
  server.answer = (socket, m) => {
    if (m.type === 'hello') {
      const resumed = !!m.resume && !server.forgetResume;
      socket.push({ type: 'welcome', connectionId: `c${server.sockets.length}`, resumeToken: `rt${server.sockets.length}`,
        user: { uid: m.dev.uid, name: m.dev.name, role: m.dev.role ?? 'participant' }, heartbeat, resumed, server: { version: 'fake' } });
      return;
    }
    if (m.type === 'ping') return server.answerPings && socket.push({ type: 'pong', ...(m.id ? { re: m.id } : {}) });
    const code = server.errors.get(m.type);
    if (code) return socket.push({ type: 'error', re: m.id, code, message: `fake ${code}` });
    if (m.id) socket.push({ type: 'ok', re: m.id });
    if (m.type === 'session.join') {
      const seq = server.seq.get(m.session) ?? 1;
      server.seq.set(m.session, seq);
      const self = { uid: 'me', name: 'Me', role: 'participant', joinedAt: 1, status: 'connected' };
      socket.push({ type: 'session.joined', session: m.session, seq, self, participants: [self], hands: [] });
    }
  };
  class FakeWebSocket {
    constructor(url, protocol) {
      Object.assign(this, { url, protocol, readyState: 0, sent: [], closedWith: null });
      server.sockets.push(this);
      setTimeout(() => {
        if (server.refuse) return this.drop(1006);
        this.readyState = 1;
        this.onopen?.({});
      }, 1);
    }
    send(text) {
      const m = JSON.parse(text);
      this.sent.push(m);
      setTimeout(() => this.readyState === 1 && server.answer(this, m), 0);
    }
    close(code) { this.closedWith = code; this.readyState = 3; }
    push(msg) { if (this.readyState === 1) this.onmessage?.({ data: JSON.stringify(msg) }); }
    drop(code, reason = '') { this.readyState = 3; this.onclose?.({ code, reason }); }
  }
  server.WebSocket = FakeWebSocket;
  server.last = () => server.sockets.at(-1);
  return server;
}
