// Relay JavaScript client: one ES module, no build step, no dependency.
// Works in browsers and in Node (pass a WebSocket constructor, e.g. the `ws` package).
// Section numbers (§) refer to protocol/PROTOCOL.md; §18 is the client checklist.

const SUBPROTOCOL = 'relay.v1';

/** Full-jitter backoff: a uniform delay in [0, min(cap, base * 2^attempt)). */
export function backoffDelay(attempt, { baseMs = 500, capMs = 20000 } = {}, random = Math.random) {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(attempt, 30));
  return Math.floor(random() * ceiling);
}

/** Close codes after which the client does not reconnect by itself (§14): normal, final. */
export function isFinalCloseCode(code) {
  return code === 1000 || (code >= 4500 && code <= 4999);
}

/** A command answered with `error` (§2), or one whose outcome is unknown. */
export class RelayError extends Error {
  constructor(code, message, reply) {
    super(message || code);
    this.name = 'RelayError';
    /** The protocol's error code (§15), or `not_connected`, `connection_lost`, `timeout`. */
    this.code = code;
    this.reply = reply;
  }
}

/** Every event the client dispatches; `detail` holds the server message or the state change. */
export class RelayEvent extends Event {
  constructor(type, detail) {
    super(type);
    this.detail = detail;
  }
}

// MARK: device id (§4 hello.device, §9a): names the app install push tokens belong to.

const DEVICE_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const DEVICE_STORAGE_KEY = 'relay.device';
let memoryDeviceId = null; // where there is no localStorage: one id per process

/** Whether the relay accepts `id` as `hello.device` (1–128 of `[A-Za-z0-9._:-]`). */
export function isValidDeviceId(id) {
  return typeof id === 'string' && DEVICE_ID.test(id);
}

/**
 * This install's device id: kept in `localStorage` (key `relay.device`) when the
 * environment has one, so a reloaded page is the same device; else one per process.
 */
export function persistentDeviceId(storage) {
  if (storage === undefined) {
    try { storage = globalThis.localStorage; } catch { storage = null; } // a getter that throws (Node without a file)
  }
  try {
    const stored = storage?.getItem(DEVICE_STORAGE_KEY);
    if (isValidDeviceId(stored)) return stored;
  } catch { /* storage disabled (private mode, sandboxed frame) */ }
  const fresh = memoryDeviceId ?? randomDeviceId();
  try {
    if (storage) { storage.setItem(DEVICE_STORAGE_KEY, fresh); return fresh; }
  } catch { /* full or disabled: fall back to memory */ }
  memoryDeviceId = fresh;
  return fresh;
}

/** 128 random bits as 32 hex digits. */
function randomDeviceId() {
  const bytes = new Uint8Array(16);
  if (globalThis.crypto?.getRandomValues) globalThis.crypto.getRandomValues(bytes);
  else for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(Math.random() * 256);
  return [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('');
}

function resolveDevice(option) {
  if (option === undefined || option === null || option === false) return null;
  if (option === true) return persistentDeviceId();
  if (!isValidDeviceId(option)) throw new TypeError('RelayClient: device must be 1-128 characters of [A-Za-z0-9._:-]');
  return option;
}

// MARK: keeping the place across a reload (§9): the resume token and, per session, the
// snapshot the replay continues from. A reloaded page resumes instead of joining afresh.

const PERSIST_KEY = 'relay.resume';
const PERSIST_VERSION = 1;

/** `persist: true` → this tab's `sessionStorage`; an object → that hook, checked. */
function resolveStore(option) {
  if (option === undefined || option === null || option === false) return null;
  if (option === true) {
    let storage = null;
    try { storage = globalThis.sessionStorage ?? null; } catch { /* a getter that throws (sandboxed frame) */ }
    if (!storage) throw new TypeError('RelayClient: persist: true needs sessionStorage; pass {get, set, remove} in Node');
    return {
      get: (key) => storage.getItem(key),
      set: (key, value) => storage.setItem(key, value),
      remove: (key) => storage.removeItem(key),
    };
  }
  if (['get', 'set', 'remove'].every((f) => typeof option[f] === 'function')) return option;
  throw new TypeError('RelayClient: persist must be true or an object with get, set and remove');
}

/** Calls `f` with `value`, at once or once the promise settles (hooks may be sync or async). */
function whenSettled(value, f) {
  return value && typeof value.then === 'function' ? value.then(f) : f(value);
}

/** The stored record, or null if it is absent, unreadable or for another relay. */
function parseStored(text, url) {
  let r;
  try { r = typeof text === 'string' ? JSON.parse(text) : null; } catch { return null; }
  if (!r || r.v !== PERSIST_VERSION || r.url !== url || typeof r.token !== 'string' || !Array.isArray(r.sessions)) return null;
  const ok = (s) => s && typeof s.session === 'string' && Number.isInteger(s.seq)
    && Array.isArray(s.participants) && Array.isArray(s.hands);
  return r.sessions.every(ok) ? r : null;
}

// Personal messages that carry `seq` only as a position marker (§2), not as session events.
const POSITION_MARKERS = new Set(['session.joined', 'session.resumed']);
// Protocol type -> event name where the plain "drop the dots" rule reads badly.
const EVENT_NAMES = { 'call.incoming': 'incomingcall' };

function eventName(type) {
  return EVENT_NAMES[type] ?? type.replace(/[._]/g, '');
}

/**
 * A connection to a relay. Commands return promises; what happens arrives as events
 * (`addEventListener('handraised', e => e.detail)`). The client keeps each joined
 * session's participants and hand queue (§18.6) and resumes after a drop (§9).
 */
export class RelayClient extends EventTarget {
  #opts;
  #WebSocket;
  #ws = null;
  #state = 'idle';
  #welcome = null;
  #resumeToken = null;
  #sessions = new Map(); // id -> {session, seq, self, participants: Map, hands: []}
  #rejoining = new Set();
  #pending = new Map(); // command id -> {resolve, reject, timer}
  #waiters = new Set();
  #nextId = 0;
  #attempt = 0;
  #retryTimer = null;
  #pingTimer = null;
  #pongTimer = null;
  #welcomeTimer = null;
  #onVisibility = null;
  #onPageHide = null;
  #device = null;
  #store = null;
  #storedUid = null; // the user of a state restored from the store, until its welcome
  #persistTimer = null;
  #writing = null; // the store write in flight (an async hook), if any
  #writeAgain = false;

  /**
   * @param {object} options `url`; `token` (string or function returning one) or
   *   `dev` `{uid, name, role}`; optional `WebSocket`, `backoff {baseMs, capMs}`,
   *   `random`, `pingIntervalMs`, `commandTimeoutMs`, `watchVisibility`, `device`
   *   (`true`: a generated id kept in localStorage; or the app's own id string),
   *   `persist` (`true`: keep the place in this tab's sessionStorage; or a
   *   `{get, set, remove}` hook, sync or async), `persistKey`, `persistDelayMs`.
   */
  constructor(options) {
    super();
    if (!options?.url) throw new TypeError('RelayClient: url is required');
    if (!options.token && !options.dev) throw new TypeError('RelayClient: token or dev is required');
    this.#opts = { backoff: {}, random: Math.random, commandTimeoutMs: 15000, watchVisibility: true,
      persistKey: PERSIST_KEY, persistDelayMs: 250, ...options };
    this.#WebSocket = options.WebSocket ?? globalThis.WebSocket;
    if (!this.#WebSocket) throw new TypeError('RelayClient: no WebSocket; pass options.WebSocket');
    this.#device = resolveDevice(options.device);
    this.#store = resolveStore(options.persist);
  }

  /** `idle`, `connecting`, `open`, `reconnecting` or `closed`. */
  get state() { return this.#state; }
  /** The user of this connection (`welcome.user`), once connected. */
  get user() { return this.#welcome?.user ?? null; }
  /** The last `welcome` (heartbeat, connectionId, resumed). */
  get welcome() { return this.#welcome; }
  /** The id sent as `hello.device` (option `device`), or null. */
  get deviceId() { return this.#device; }
  /** Ids of the sessions this client is in. */
  get sessionIds() { return [...this.#sessions.keys()]; }

  /** A session's state: `{session, seq, self, participants: [...], hands: [...]}`, or null. */
  session(id) {
    const s = this.#sessions.get(id);
    return s ? { ...s, participants: [...s.participants.values()], hands: [...s.hands] } : null;
  }

  /**
   * Opens the connection; resolves with `welcome`, rejects if this first attempt fails.
   * With `persist` and a stored place, it resumes (`welcome.resumed`), else joins afresh.
   */
  connect() {
    if (this.#state !== 'idle' && this.#state !== 'closed') return Promise.reject(new RelayError('conflict', 'already connected'));
    // A new start: nothing of an earlier, closed connection is resumed, unless stored.
    this.#welcome = this.#resumeToken = this.#storedUid = null;
    this.#sessions.clear();
    this.#attempt = 0;
    this.#watchVisibility();
    this.#watchPageHide();
    const welcomed = this.#waitFor('welcome', () => true);
    this.#setState('connecting');
    const start = () => { if (this.#state === 'connecting' && !this.#ws) this.#open('connecting'); };
    if (!this.#store) start();
    else {
      let read;
      try { read = this.#store.get(this.#opts.persistKey); } catch { read = null; }
      Promise.resolve(whenSettled(read, (text) => this.#restore(text))).catch(() => {}).then(start);
    }
    return welcomed;
  }

  /** Closes for good (1000): no reconnect; pending commands fail with `connection_lost`. */
  close() {
    this.#teardown(1000, 'client closed');
    this.#finish(1000, 'client closed');
    this.#forget(); // a deliberate close ends the place (§5.3): nothing to resume
  }

  /**
   * Ends this client as a reload or a killed process would: the stored place is
   * written, and the participant is not ended (§8: lost, resumable within grace).
   * Node's `ws` socket is cut without a close frame (`terminate`); a browser socket
   * is left to the page's unload. A new client with the same `persist` then resumes.
   */
  suspend() {
    const ws = this.#ws;
    const written = this.#persistNow();
    this.#ws = null;
    if (ws) {
      ws.onopen = ws.onmessage = ws.onclose = null;
      try { ws.terminate?.(); } catch { /* already gone */ }
    }
    this.#teardown(4000, 'suspended');
    this.#store = null; // the closed client must not overwrite what its successor stores
    this.#finish(4000, 'suspended');
    return written;
  }

  /** `session.join` (§6): resolves with the `session.joined` snapshot. */
  async joinSession(id) {
    const joined = this.#waitFor('sessionjoined', (d) => d.session === id);
    try {
      await this.#command('session.join', { session: id });
    } catch (err) {
      this.#cancelWaiter(joined);
      throw err;
    }
    return joined;
  }

  leaveSession(id) { return this.#command('session.leave', { session: id }); }
  raiseHand(id) { return this.#command('hand.raise', { session: id }); }
  /** Lowers the own hand, or `uid`'s (host only, §7). */
  lowerHand(id, uid) { return this.#command('hand.lower', uid ? { session: id, uid } : { session: id }); }
  lowerAllHands(id) { return this.#command('hand.lower_all', { session: id }); }
  removeParticipant(id, uid) { return this.#command('participant.remove', { session: id, uid }); }
  sendMessage(id, data) { return this.#command('message.send', { session: id, data }); }

  /** `call.initiate` (§10.1): `to` is a uid or a list; resolves with `{callId, sessionId}`. */
  initiateCall(to, callType = 'audio', metadata) {
    const fields = { to: Array.isArray(to) ? to : [to], callType };
    if (metadata !== undefined) fields.metadata = metadata;
    return this.#command('call.initiate', fields);
  }

  acceptCall(callId) { return this.#command('call.accept', { callId }); }
  rejectCall(callId, reason) { return this.#command('call.reject', reason ? { callId, reason } : { callId }); }
  cancelCall(callId) { return this.#command('call.cancel', { callId }); }
  endCall(callId) { return this.#command('call.end', { callId }); }
  /** `client.background` (§8): a longer grace while the app is hidden. */
  setBackground(background) { return this.#command('client.background', { background: !!background }); }
  /** An app-level `ping`; resolves on `pong`. */
  ping() { return this.#command('ping', {}); }

  // MARK: push (§9a). Web Push is not a relay push kind: these are for native shells
  // (React Native, Capacitor, Electron) holding an APNs or FCM token.

  /**
   * `push.register`: `kind` is `apns-voip`, `apns` or `fcm`; `environment`
   * (`production` default, or `sandbox`) applies to APNs only. Needs the `device` option.
   */
  registerPushToken(token, kind, environment) {
    const fields = { token, kind };
    if (environment !== undefined && kind !== 'fcm') fields.environment = environment;
    return this.#command('push.register', fields);
  }

  /** `push.unregister`: the token gets no more pushes. */
  unregisterPushToken(token) { return this.#command('push.unregister', { token }); }

  // MARK: connection

  #open(state) {
    this.#setState(state);
    let ws;
    try {
      ws = new this.#WebSocket(this.#opts.url, SUBPROTOCOL);
    } catch (err) {
      return this.#dropped(1006, String(err?.message ?? err));
    }
    this.#ws = ws;
    // A socket that never opens, or a relay that never answers hello, counts as a drop.
    this.#welcomeTimer = setTimeout(() => this.#dropped(4000, 'no welcome'), this.#opts.commandTimeoutMs);
    ws.onopen = () => this.#sendHello(ws);
    ws.onmessage = (e) => this.#receive(typeof e.data === 'string' ? e.data : String(e.data));
    ws.onclose = (e) => { if (this.#ws === ws) this.#dropped(e.code, e.reason); };
    ws.onerror = () => {}; // the close event that follows says what happened
  }

  async #sendHello(ws) {
    // §5.6: membership events may come coalesced (participants.diff); applied below
    // one by one, so app code sees the same per-member events either way.
    // §5 resume.after_unload: with a stored place, the browser's unload close (1001,
    // a reload included) leaves us lost on the relay, so the next page resumes.
    const hello = { type: 'hello', capabilities: this.#store ? ['presence.diff', 'resume.after_unload'] : ['presence.diff'] };
    if (this.#device) hello.device = this.#device;
    if (this.#opts.dev) hello.dev = this.#opts.dev;
    else {
      try {
        hello.token = typeof this.#opts.token === 'function' ? await this.#opts.token() : this.#opts.token;
      } catch (err) {
        // No token, no connection: final, like the relay's own 4501 (§14).
        if (this.#ws === ws) this.#dropped(4501, `token: ${err?.message ?? err}`);
        return;
      }
    }
    // §9: resume with the last seq of every session, so the server replays only what we lack.
    // Also with no session: resuming re-attaches the user's calls kept during grace.
    if (this.#resumeToken) {
      const sessions = {};
      for (const [id, s] of this.#sessions) sessions[id] = s.seq;
      hello.resume = { token: this.#resumeToken, sessions };
    }
    if (this.#ws === ws) ws.send(JSON.stringify(hello));
  }

  /** The socket ended (close frame or not). Decides between reconnecting and stopping (§14). */
  #dropped(code, reason) {
    const wasOpen = this.#welcome !== null && this.#state === 'open';
    const firstAttempt = this.#state === 'connecting';
    this.#teardown(code, reason);
    if (firstAttempt || isFinalCloseCode(code)) {
      if (code === 4509) this.#forget(); // another connection resumed this place (§9)
      if (wasOpen) this.#emit('connectionlost', { code, reason, willReconnect: false });
      return this.#finish(code, reason);
    }
    const delayMs = backoffDelay(this.#attempt, this.#opts.backoff, this.#opts.random);
    if (wasOpen) this.#emit('connectionlost', { code, reason, willReconnect: true });
    this.#emit('reconnecting', { attempt: this.#attempt + 1, delayMs, code });
    this.#attempt += 1;
    this.#setState('reconnecting');
    this.#retryTimer = setTimeout(() => { this.#retryTimer = null; this.#open('reconnecting'); }, delayMs);
  }

  /** Forgets the socket without waiting for a close handshake a dead peer never answers. */
  #teardown(code, reason) {
    const ws = this.#ws;
    this.#ws = null;
    clearTimeout(this.#welcomeTimer);
    this.#stopHeartbeat();
    if (ws) {
      ws.onopen = ws.onmessage = ws.onclose = null;
      try { if (ws.readyState <= 1) ws.close(code === 1000 ? 1000 : 4000, reason?.slice(0, 100)); } catch { /* already gone */ }
    }
    for (const [, p] of this.#pending) {
      clearTimeout(p.timer);
      p.reject(new RelayError('connection_lost', 'the connection ended before the reply'));
    }
    this.#pending.clear();
  }

  #finish(code, reason) {
    clearTimeout(this.#retryTimer);
    this.#retryTimer = null;
    if (this.#state === 'closed') return;
    this.#setState('closed');
    if (this.#onVisibility) document.removeEventListener('visibilitychange', this.#onVisibility);
    if (this.#onPageHide) {
      globalThis.removeEventListener('pagehide', this.#onPageHide);
      document.removeEventListener('visibilitychange', this.#onPageHide);
    }
    this.#onVisibility = this.#onPageHide = null;
    const err = new RelayError('connection_lost', `closed (${code}${reason ? `: ${reason}` : ''})`);
    for (const w of this.#waiters) w.reject(err);
    this.#waiters.clear();
    this.#emit('closed', { code, reason });
  }

  #setState(state) {
    if (this.#state === state) return;
    this.#state = state;
    this.#emit('statechange', { state });
  }

  // MARK: liveness (§5, §18.4): browsers cannot see WebSocket pings, so ping in the app.

  #startHeartbeat() {
    const hb = this.#welcome.heartbeat ?? {};
    const intervalMs = this.#opts.pingIntervalMs ?? hb.interval ?? 10000;
    const timeoutMs = this.#opts.pongTimeoutMs ?? hb.timeout ?? 15000;
    this.#pingTimer = setInterval(() => {
      if (this.#pongTimer) return; // still waiting for the last one
      this.#send({ type: 'ping' });
      this.#pongTimer = setTimeout(() => this.#dropped(4000, 'no pong'), timeoutMs);
    }, intervalMs);
  }

  #stopHeartbeat() {
    clearInterval(this.#pingTimer);
    clearTimeout(this.#pongTimer);
    this.#pingTimer = this.#pongTimer = null;
  }

  #watchVisibility() {
    if (!this.#opts.watchVisibility || typeof document === 'undefined' || this.#onVisibility) return;
    this.#onVisibility = () => { if (this.#state === 'open') this.#send({ type: 'client.background', background: document.hidden }); };
    document.addEventListener('visibilitychange', this.#onVisibility);
  }

  // MARK: persistence

  /** A page being unloaded (or hidden: mobile browsers may discard a hidden tab without
   * `pagehide`) writes its place now: the coalescing timer might never fire. */
  #watchPageHide() {
    if (!this.#store || typeof globalThis.addEventListener !== 'function' || typeof document === 'undefined' || this.#onPageHide) return;
    this.#onPageHide = (e) => { if (e.type === 'pagehide' || document.visibilityState === 'hidden') this.#persistNow(); };
    globalThis.addEventListener('pagehide', this.#onPageHide);
    document.addEventListener('visibilitychange', this.#onPageHide);
  }

  /** Takes a stored place: the next hello resumes it (§9). */
  #restore(text) {
    const r = parseStored(text, this.#opts.url);
    if (!r) return;
    this.#resumeToken = r.token;
    this.#storedUid = typeof r.uid === 'string' ? r.uid : null;
    for (const s of r.sessions) {
      this.#sessions.set(s.session, {
        session: s.session, seq: s.seq, self: s.self,
        participants: new Map(s.participants.map((p) => [p.uid, { ...p }])),
        hands: s.hands.map((h) => ({ ...h })),
      });
    }
  }

  #record() {
    const sessions = [...this.#sessions.values()].map((s) => ({
      session: s.session, seq: s.seq, self: s.self, participants: [...s.participants.values()], hands: s.hands,
    }));
    return JSON.stringify({ v: PERSIST_VERSION, url: this.#opts.url, uid: this.user?.uid, token: this.#resumeToken, sessions });
  }

  /** Session events move `seq` often: one write per `persistDelayMs` at most. A stored
   * snapshot a few events old is still exact: it resumes from its own `seq`. */
  #persistSoon() {
    if (!this.#store || this.#persistTimer) return;
    this.#persistTimer = setTimeout(() => { this.#persistTimer = null; this.#persistNow(); }, this.#opts.persistDelayMs);
  }

  /** Writes the place now (one async write at a time; a change meanwhile writes once more). */
  #persistNow(store = this.#store) {
    clearTimeout(this.#persistTimer);
    this.#persistTimer = null;
    if (!store || !this.#resumeToken) return Promise.resolve();
    if (this.#writing) { this.#writeAgain = true; return this.#writing; }
    let result;
    try { result = store.set(this.#opts.persistKey, this.#record()); } catch { return Promise.resolve(); } // full or disabled
    if (!result || typeof result.then !== 'function') return Promise.resolve();
    this.#writing = result.catch(() => {}).then(() => {
      this.#writing = null;
      // The store the chain began with: suspend() detaches it, yet its last write must land.
      if (this.#writeAgain) { this.#writeAgain = false; return this.#persistNow(store); }
    });
    return this.#writing;
  }

  /** Removes the stored place (after any write in flight, which it must not race). */
  #forget() {
    clearTimeout(this.#persistTimer);
    this.#persistTimer = null;
    const store = this.#store;
    if (!store) return;
    this.#writeAgain = false;
    const remove = () => { try { return store.remove(this.#opts.persistKey); } catch { return undefined; } };
    if (this.#writing) this.#writing.then(remove);
    else remove();
  }

  // MARK: commands

  #command(type, fields) {
    if (this.#state !== 'open') return Promise.reject(new RelayError('not_connected', `not connected (${this.#state})`));
    const id = `c${++this.#nextId}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new RelayError('timeout', `${type}: no reply`));
      }, this.#opts.commandTimeoutMs);
      this.#pending.set(id, { resolve, reject, timer });
      this.#send({ type, id, ...fields });
    });
  }

  #send(msg) {
    if (this.#ws?.readyState === 1) this.#ws.send(JSON.stringify(msg));
  }

  #reply(msg) {
    const p = this.#pending.get(msg.re);
    if (!p) return;
    this.#pending.delete(msg.re);
    clearTimeout(p.timer);
    if (msg.type === 'error') p.reject(new RelayError(msg.code, msg.message, msg));
    else p.resolve(msg);
  }

  // MARK: inbound

  #receive(text) {
    clearTimeout(this.#pongTimer); // any inbound message proves liveness (§5)
    this.#pongTimer = null;
    let msg;
    try { msg = JSON.parse(text); } catch { return; }
    if (!msg || typeof msg.type !== 'string') return;
    this.#emit('servermessage', msg);
    if (msg.re !== undefined && (msg.type === 'ok' || msg.type === 'error' || msg.type === 'pong')) this.#reply(msg);
    if (msg.type === 'welcome') return this.#welcomed(msg);
    if (msg.type === 'ok' || msg.type === 'pong') return;
    if (msg.type === 'error') return msg.re === undefined ? this.#emit('error', msg) : undefined;
    if (msg.type === 'participants.diff' && Array.isArray(msg.events)) {
      for (const event of msg.events) if (event && typeof event.seq === 'number') this.#sessionEvent(event);
      return;
    }
    if (typeof msg.seq === 'number' && typeof msg.session === 'string' && !POSITION_MARKERS.has(msg.type)) {
      return this.#sessionEvent(msg);
    }
    this.#personalEvent(msg);
  }

  #welcomed(msg) {
    const fromStore = this.#welcome === null && this.#storedUid !== null;
    // A stored place of another user (a new token for someone else) is not ours to rejoin.
    if (fromStore && msg.user?.uid !== this.#storedUid) this.#sessions.clear();
    this.#storedUid = null;
    const reconnect = this.#welcome !== null || fromStore;
    const rejoin = reconnect && !msg.resumed ? [...this.#sessions.keys()] : [];
    clearTimeout(this.#welcomeTimer);
    this.#welcome = msg;
    this.#resumeToken = msg.resumeToken; // changes with every connection (§18.1)
    this.#attempt = 0;
    this.#setState('open');
    this.#startHeartbeat();
    if (typeof document !== 'undefined' && document.hidden) this.#send({ type: 'client.background', background: true });
    this.#persistNow(); // the new token at once: the old one resumes nothing any more
    this.#emit('welcome', msg);
    if (reconnect) this.#emit('connectionrestored', fromStore ? { resumed: !!msg.resumed, fromStorage: true } : { resumed: !!msg.resumed });
    // §9: the server no longer holds us; join afresh and rebuild from the snapshots.
    for (const id of rejoin) {
      this.#rejoining.add(id);
      this.#command('session.join', { session: id }).catch((err) => {
        this.#rejoining.delete(id);
        this.#sessions.delete(id);
        this.#emit('sessionleft', { session: id, reason: 'rejoin_failed', error: err });
      });
    }
  }

  /** §18.2: each session event must carry last seq + 1; older ones are duplicates. */
  #sessionEvent(msg) {
    const s = this.#sessions.get(msg.session);
    if (!s || msg.seq <= s.seq) return;
    if (msg.seq !== s.seq + 1) return this.#dropped(4000, `seq gap in ${msg.session}`);
    s.seq = msg.seq;
    applySessionEvent(s, msg);
    this.#persistSoon();
    this.#emit(eventName(msg.type), msg);
  }

  #personalEvent(msg) {
    let detail = msg;
    if (msg.type === 'session.joined') {
      const recovered = msg.recovered ?? (this.#rejoining.delete(msg.session) ? false : undefined);
      detail = recovered === undefined ? msg : { ...msg, recovered };
      this.#sessions.set(msg.session, {
        session: msg.session, seq: msg.seq, self: msg.self,
        participants: new Map(msg.participants.map((p) => [p.uid, { ...p }])),
        hands: msg.hands.map((h) => ({ ...h })),
      });
    } else if (msg.type === 'session.resumed') {
      const s = this.#sessions.get(msg.session);
      if (s) s.seq = Math.max(s.seq, msg.seq);
    } else if (msg.type === 'session.left' || msg.type === 'session.timed_out') {
      this.#sessions.delete(msg.session);
    }
    if (POSITION_MARKERS.has(msg.type) || msg.type === 'session.left' || msg.type === 'session.timed_out') this.#persistNow();
    this.#emit(eventName(msg.type), detail);
  }

  // MARK: events

  #emit(type, detail) {
    for (const w of [...this.#waiters]) {
      if (w.type === type && w.match(detail)) {
        this.#waiters.delete(w);
        w.resolve(detail);
      }
    }
    this.dispatchEvent(new RelayEvent(type, detail));
  }

  #waitFor(type, match) {
    let waiter;
    const promise = new Promise((resolve, reject) => { waiter = { type, match, resolve, reject }; });
    this.#waiters.add(waiter);
    promise.waiter = waiter;
    return promise;
  }

  #cancelWaiter(promise) {
    this.#waiters.delete(promise.waiter);
  }
}

/** Rebuilds participants and the hand queue from one session event (§18.6). */
function applySessionEvent(s, msg) {
  const p = s.participants.get(msg.uid);
  switch (msg.type) {
    case 'participant.joined': s.participants.set(msg.participant.uid, { ...msg.participant }); break;
    case 'participant.lost': if (p) p.status = 'lost'; break;
    case 'participant.restored': if (p) p.status = 'connected'; break;
    case 'participant.left':
    case 'participant.timed_out':
      s.participants.delete(msg.uid);
      s.hands = s.hands.filter((h) => h.uid !== msg.uid);
      break;
    case 'hand.raised':
      if (!s.hands.some((h) => h.uid === msg.uid)) s.hands.push({ uid: msg.uid, name: msg.name, raisedAt: msg.raisedAt });
      break;
    case 'hand.lowered': s.hands = s.hands.filter((h) => h.uid !== msg.uid); break;
    case 'hands.cleared': s.hands = []; break;
    default: break;
  }
}
