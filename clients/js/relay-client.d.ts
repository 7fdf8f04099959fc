// Types of relay-client.js. Field names are those of the wire protocol (protocol/PROTOCOL.md).

export type Role = 'host' | 'participant';
export type CallType = 'audio' | 'video';
export type ClientState = 'idle' | 'connecting' | 'open' | 'reconnecting' | 'closed';

export interface DevIdentity { uid: string; name: string; role?: Role }
export interface User { uid: string; name: string; avatar?: string; role: Role }
export interface Participant extends User { joinedAt: number; status: 'connected' | 'lost' }
export interface Hand { uid: string; name: string; raisedAt: number }

export interface Welcome {
  type: 'welcome';
  connectionId: string;
  resumeToken: string;
  user: User;
  heartbeat: { interval: number; timeout: number };
  resumed: boolean;
  server: { version: string };
  /** §4: the `hello.capabilities` the server accepted (the client offers `presence.diff`, §5.6). */
  capabilities?: string[];
}

export interface SessionJoined {
  type: 'session.joined';
  session: string;
  seq: number;
  self: Participant;
  participants: Participant[];
  hands: Hand[];
  /** false when the client re-joined because it could not resume (§9). */
  recovered?: boolean;
}

/** Every session event carries these (§2). */
export interface SessionEvent { type: string; session: string; seq: number; ts: number }

export interface SessionState {
  session: string;
  seq: number;
  self: Participant;
  participants: Participant[];
  hands: Hand[];
}

export interface IncomingCall {
  type: 'call.incoming';
  callId: string;
  sessionId: string;
  from: { uid: string; name: string; avatar?: string };
  to: string[];
  callType: CallType;
  metadata?: Record<string, unknown>;
  expiresAt: number;
}

export interface CallEvent {
  type: string; callId: string; uid?: string; sessionId?: string; by?: string; reason?: string; duration?: number;
  /** call.ringing / call.offline: devices of that callee the relay rang by push (§9a). */
  pushed?: number;
}

export interface RelayEventMap {
  welcome: Welcome;
  statechange: { state: ClientState };
  connectionlost: { code: number; reason: string; willReconnect: boolean };
  reconnecting: { attempt: number; delayMs: number; code: number };
  /** `fromStorage`: the first connection of a client that found a stored place (`persist`). */
  connectionrestored: { resumed: boolean; fromStorage?: true };
  closed: { code: number; reason: string };
  error: { type: 'error'; code: string; message: string };
  servermessage: { type: string; [field: string]: unknown };
  sessionjoined: SessionJoined;
  sessionresumed: { type: 'session.resumed'; session: string; recovered: true; seq: number };
  sessionleft: { session: string; reason: 'left' | 'replaced' | 'removed' | 'rejoin_failed'; error?: RelayError };
  sessionidlewarning: { session: string; timeoutAt: number };
  sessiontimedout: { session: string };
  participantjoined: SessionEvent & { participant: Participant };
  participantleft: SessionEvent & { uid: string; reason: 'left' | 'removed' | 'idle' };
  participantlost: SessionEvent & { uid: string };
  participantrestored: SessionEvent & { uid: string };
  participanttimedout: SessionEvent & { uid: string };
  handraised: SessionEvent & Hand;
  handlowered: SessionEvent & { uid: string; by: string | null; reason: 'self' | 'host' | 'left' | 'removed' | 'timed_out' };
  handscleared: SessionEvent & { by: string };
  message: SessionEvent & { from: string; data: unknown };
  incomingcall: IncomingCall;
  callringing: CallEvent;
  calloffline: CallEvent;
  callbusy: CallEvent;
  callaccepted: CallEvent & { uid: string; sessionId: string };
  callrejected: CallEvent & { uid: string; reason: 'declined' | 'busy' };
  callcancelled: CallEvent & { reason: string };
  callunanswered: CallEvent & { uid: string };
  callended: CallEvent & { by: string; reason: 'ended' | 'timed_out'; duration: number };
}

export class RelayEvent<T = unknown> extends Event {
  readonly detail: T;
}

export class RelayError extends Error {
  /** A protocol error code (§15) or `not_connected`, `connection_lost`, `timeout`. */
  readonly code: string;
  readonly reply?: { type: 'error'; re?: string; code: string; message: string };
}

export interface RelayClientOptions {
  url: string;
  token?: string | (() => string | Promise<string>);
  dev?: DevIdentity;
  /** The WebSocket constructor; defaults to globalThis.WebSocket. */
  WebSocket?: unknown;
  /** Full-jitter backoff; defaults 500 and 20 000 ms. */
  backoff?: { baseMs?: number; capMs?: number };
  random?: () => number;
  /** Defaults to welcome.heartbeat.interval / .timeout. */
  pingIntervalMs?: number;
  pongTimeoutMs?: number;
  commandTimeoutMs?: number;
  /** Send client.background on visibilitychange (browsers); default true. */
  watchVisibility?: boolean;
  /**
   * `hello.device` (§4), the app install push tokens belong to: `true` for an id
   * generated once and kept in localStorage (else in memory), or the app's own id
   * (1–128 characters of [A-Za-z0-9._:-]). Off by default.
   */
  device?: boolean | string;
  /**
   * Keep this client's place (resume token, sessions, last `seq`s) across a page
   * reload or a process restart, so `connect()` resumes it (§9): `true` for this
   * tab's `sessionStorage`, or a hook whose functions may return promises. Cleared
   * by `close()`. Off by default.
   */
  persist?: boolean | PersistStore;
  /** The storage key of the place; default `relay.resume`. */
  persistKey?: string;
  /** Longest wait before a `seq` change is written (token and membership changes are
   * written at once); default 250. */
  persistDelayMs?: number;
}

/** Where `persist` keeps the place: one string value per key. */
export interface PersistStore {
  get(key: string): string | null | undefined | Promise<string | null | undefined>;
  set(key: string, value: string): void | Promise<void>;
  remove(key: string): void | Promise<void>;
}

export type PushKind = 'apns-voip' | 'apns' | 'fcm';
export type PushEnvironment = 'production' | 'sandbox';

export interface Ok { type: 'ok'; re: string; [field: string]: unknown }

export class RelayClient extends EventTarget {
  constructor(options: RelayClientOptions);
  readonly state: ClientState;
  readonly user: User | null;
  readonly welcome: Welcome | null;
  readonly sessionIds: string[];
  readonly deviceId: string | null;
  session(id: string): SessionState | null;
  connect(): Promise<Welcome>;
  close(): void;
  /** Ends this client as a reload would: the place is written and the participant is
   * lost, not left (§8); resolves once the place is stored. */
  suspend(): Promise<void>;
  joinSession(id: string): Promise<SessionJoined>;
  leaveSession(id: string): Promise<Ok>;
  raiseHand(id: string): Promise<Ok>;
  lowerHand(id: string, uid?: string): Promise<Ok>;
  lowerAllHands(id: string): Promise<Ok>;
  removeParticipant(id: string, uid: string): Promise<Ok>;
  sendMessage(id: string, data: unknown): Promise<Ok>;
  initiateCall(to: string | string[], callType?: CallType, metadata?: Record<string, unknown>): Promise<Ok & { callId: string; sessionId: string }>;
  acceptCall(callId: string): Promise<Ok>;
  rejectCall(callId: string, reason?: 'declined' | 'busy'): Promise<Ok>;
  cancelCall(callId: string): Promise<Ok>;
  endCall(callId: string): Promise<Ok>;
  setBackground(background: boolean): Promise<Ok>;
  ping(): Promise<{ type: 'pong'; re: string }>;
  registerPushToken(token: string, kind: PushKind, environment?: PushEnvironment): Promise<Ok>;
  unregisterPushToken(token: string): Promise<Ok>;
  addEventListener<K extends keyof RelayEventMap>(type: K, listener: (event: RelayEvent<RelayEventMap[K]>) => void, options?: boolean | AddEventListenerOptions): void;
  addEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | AddEventListenerOptions): void;
  removeEventListener<K extends keyof RelayEventMap>(type: K, listener: (event: RelayEvent<RelayEventMap[K]>) => void, options?: boolean | EventListenerOptions): void;
  removeEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | EventListenerOptions): void;
}

export function backoffDelay(attempt: number, backoff?: { baseMs?: number; capMs?: number }, random?: () => number): number;
export function isFinalCloseCode(code: number): boolean;
export function isValidDeviceId(id: unknown): boolean;
export function persistentDeviceId(storage?: { getItem(key: string): string | null; setItem(key: string, value: string): void } | null): string;
