// The demo page: plain DOM on top of the client module. Everything shown comes from
// the client's session state (snapshots plus events, PROTOCOL.md §18.6).
import { RelayClient } from '/demo/relay-client.js';

const $ = (id) => document.getElementById(id);
const ui = {
  form: $('join'), room: $('room'), conn: $('conn-state'), me: $('me'), roomName: $('room-name'),
  toggle: $('hand-toggle'), people: $('participants'), hands: $('hands'), noHands: $('no-hands'),
  lowerAll: $('lower-all'), callStatus: $('call-status'), callCancel: $('call-cancel'),
  callEnd: $('call-end'), dialog: $('incoming'), log: $('log'), announcer: $('announcer'),
};

let client = null;
let sessionId = null;
let clockOffsetMs = 0; // server wall clock minus ours, from the `ts` of session events (§2)
const shown = new Map(); // uid -> {name, role, label}: what the list shows, timed-out users included
let call = null; // {callId, peer, direction, state}

// MARK: joining

const params = new URLSearchParams(location.search);
for (const key of ['session', 'name', 'role']) if (params.get(key)) $(key).value = params.get(key);

// The tab's identity and session, beside the client's own record (`persist: true`):
// a reload enters the room again and the client resumes its place (§9).
const DEMO_KEY = 'relay.demo';

ui.form.addEventListener('submit', async (event) => {
  event.preventDefault();
  $('join-error').textContent = '';
  const name = $('name').value.trim();
  const token = $('token').value.trim();
  const uid = name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '') || `user-${Date.now() % 10000}`;
  const identity = token ? { token } : { dev: { uid, name, role: $('role').value } };
  await enter(identity, $('session').value.trim());
});

/** Connects (resuming a stored place if this tab has one) and shows the room. */
async function enter(identity, session) {
  const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/ws`;
  client = new RelayClient({ url, ...identity, persist: true });
  listen(client);
  try {
    await client.connect();
    sessionId = session;
    // A resumed place holds the session already (a lost one is rejoined by the client).
    if (client.session(sessionId)) showSession(client.session(sessionId));
    else await client.joinSession(sessionId);
  } catch (err) {
    $('join-error').textContent = `Could not join: ${err.code ?? ''} ${err.message}`;
    client.close();
    client = null;
    sessionStorage.removeItem(DEMO_KEY);
    return;
  }
  sessionStorage.setItem(DEMO_KEY, JSON.stringify({ identity, session }));
  ui.form.hidden = true;
  ui.room.hidden = false;
  ui.roomName.textContent = sessionId;
  ui.me.textContent = `${client.user.name} (${client.user.role})`;
  document.body.classList.toggle('is-host', client.user.role === 'host');
  ui.lowerAll.hidden = client.user.role !== 'host';
  $('room-title').focus();
}

function showSession(state) {
  shown.clear();
  for (const p of state.participants) shown.set(p.uid, { name: p.name, role: p.role, label: p.status });
  render();
}

$('leave').addEventListener('click', () => {
  client?.close(); // a deliberate leave: the client forgets its stored place
  client = null;
  sessionStorage.removeItem(DEMO_KEY);
  shown.clear();
  closeDialog();
  call = null;
  showCall('No call. Use “Ring” next to a participant.');
  ui.room.hidden = true;
  ui.form.hidden = false;
  $('name').focus();
});

try {
  const stored = JSON.parse(sessionStorage.getItem(DEMO_KEY) ?? 'null');
  if (stored?.identity && typeof stored.session === 'string') enter(stored.identity, stored.session);
} catch { /* nothing stored, or storage disabled: the form it is */ }

// MARK: events

function listen(c) {
  c.addEventListener('statechange', (e) => {
    const text = { connecting: 'Connecting…', open: 'Connected', reconnecting: 'Connection lost, reconnecting…', closed: 'Disconnected' };
    ui.conn.textContent = text[e.detail.state] ?? e.detail.state;
    ui.conn.dataset.state = e.detail.state;
  });
  c.addEventListener('servermessage', (e) => {
    const m = e.detail;
    if (typeof m.ts === 'number' && typeof m.seq === 'number') clockOffsetMs = m.ts - Date.now();
    if (m.type !== 'ok' && m.type !== 'pong') log(describe(m));
  });
  c.addEventListener('sessionjoined', (e) => showSession(e.detail));
  c.addEventListener('sessionresumed', () => render());
  c.addEventListener('participantjoined', (e) => {
    const p = e.detail.participant;
    shown.set(p.uid, { name: p.name, role: p.role, label: 'connected' });
    announce(`${p.name} joined`);
    render();
  });
  c.addEventListener('participantleft', (e) => {
    announce(`${nameOf(e.detail.uid)} left`);
    shown.delete(e.detail.uid);
    render();
  });
  const status = (label, verb) => (e) => {
    const entry = shown.get(e.detail.uid);
    if (entry) entry.label = label;
    if (e.detail.uid !== client.user.uid) announce(`${nameOf(e.detail.uid)} ${verb}`);
    render();
  };
  c.addEventListener('participantlost', status('lost', 'lost connection'));
  c.addEventListener('participantrestored', status('restored', 'is back'));
  c.addEventListener('participanttimedout', status('timed out', 'timed out'));
  c.addEventListener('handraised', (e) => { announce(`${who(e.detail.uid)} raised ${their(e.detail.uid)} hand`); render(); });
  c.addEventListener('handlowered', (e) => {
    const { uid, by, reason } = e.detail;
    const whose = uid === client.user.uid ? 'your' : `${nameOf(uid)}'s`;
    if (reason === 'host' && by && by !== uid) announce(`${who(by)} lowered ${whose} hand`);
    else if (reason === 'timed_out') announce(`${nameOf(uid)}'s hand was lowered (timed out)`);
    else announce(`${who(uid)} lowered ${their(uid)} hand`);
    render();
  });
  c.addEventListener('handscleared', () => { announce('All hands lowered'); render(); });
  c.addEventListener('sessionleft', (e) => {
    const why = { removed: 'A host removed you from the session', replaced: 'You joined from another window' };
    announce(why[e.detail.reason] ?? `You left the session (${e.detail.reason})`);
    if (e.detail.session === sessionId) $('leave').click();
  });
  c.addEventListener('connectionlost', () => announce('Connection lost, reconnecting'));
  c.addEventListener('connectionrestored', (e) => {
    if (e.detail.fromStorage) announce(e.detail.resumed ? 'Back in your place' : 'Rejoining');
    else announce(e.detail.resumed ? 'Reconnected' : 'Reconnected; rejoining');
  });
  listenCalls(c);
}

function listenCalls(c) {
  c.addEventListener('incomingcall', (e) => {
    const d = e.detail;
    if (call && call.state !== 'ended') return void c.rejectCall(d.callId, 'busy').catch(() => {});
    call = { callId: d.callId, peer: d.from.name, direction: 'in', state: 'ringing' };
    $('incoming-text').textContent = `${d.from.name} is calling (${d.callType}).`;
    announce(`${d.from.name} is calling`);
    showCall(`${d.from.name} is calling you…`);
    if (!ui.dialog.open) ui.dialog.showModal();
    $('accept').focus();
  });
  const ours = (f) => (e) => { if (call && e.detail.callId === call.callId) f(e.detail); };
  c.addEventListener('callringing', ours(() => showCall(`Ringing ${call.peer}…`)));
  c.addEventListener('calloffline', ours(() => showCall(`${call.peer} is offline; still ringing…`)));
  c.addEventListener('callbusy', ours(() => endCall(`${call.peer} is busy.`)));
  c.addEventListener('callaccepted', ours(() => {
    call.state = 'accepted';
    closeDialog();
    announce(`In call with ${call.peer}`);
    showCall(`In call with ${call.peer}.`);
  }));
  c.addEventListener('callrejected', ours((d) => endCall(`${call.peer} ${d.reason === 'busy' ? 'is busy' : 'declined'}.`)));
  c.addEventListener('callunanswered', ours(() => endCall(`${call.peer} did not answer.`)));
  c.addEventListener('callcancelled', ours((d) => endCall(`Call cancelled (${d.reason.replace(/_/g, ' ')}).`)));
  c.addEventListener('callended', ours((d) => {
    const how = d.reason === 'timed_out' ? `${who(d.by)} timed out` : `ended by ${who(d.by)}`;
    endCall(`Call ${how} after ${Math.round(d.duration / 1000)} s.`);
  }));
}

// MARK: actions

ui.toggle.addEventListener('click', () => {
  const raised = ui.toggle.getAttribute('aria-pressed') === 'true';
  act(raised ? client.lowerHand(sessionId) : client.raiseHand(sessionId));
});
ui.lowerAll.addEventListener('click', () => act(client.lowerAllHands(sessionId)));
ui.callCancel.addEventListener('click', () => act(client.cancelCall(call.callId)));
ui.callEnd.addEventListener('click', () => act(client.endCall(call.callId)));
$('accept').addEventListener('click', () => act(client.acceptCall(call.callId)));
$('decline').addEventListener('click', () => act(client.rejectCall(call.callId, 'declined')));
// Escape on the dialog declines rather than leaving the call ringing unseen.
ui.dialog.addEventListener('cancel', (e) => { e.preventDefault(); act(client.rejectCall(call.callId, 'declined')); });

// Buttons inside the lists are created on each render, so one delegated listener serves them.
for (const list of [ui.people, ui.hands]) {
  list.addEventListener('click', (e) => {
    const button = e.target.closest('button[data-action]');
    if (!button) return;
    const uid = button.dataset.uid;
    if (button.dataset.action === 'lower') act(client.lowerHand(sessionId, uid));
    if (button.dataset.action === 'remove') act(client.removeParticipant(sessionId, uid));
    if (button.dataset.action === 'ring') ring(uid);
  });
}

async function ring(uid) {
  call = { callId: null, peer: nameOf(uid), direction: 'out', state: 'ringing' };
  showCall(`Calling ${call.peer}…`);
  try {
    const ok = await client.initiateCall(uid, 'audio');
    call.callId = ok.callId;
  } catch (err) {
    endCall(`Could not call: ${err.code}`);
  }
}

/** Runs a command; the events, not the reply, update the page (§18.3). */
function act(promise) {
  promise.catch((err) => { announce(`Failed: ${err.code}`); log(`error ${err.code}: ${err.message}`); });
}

// MARK: rendering

function render() {
  const state = client?.session(sessionId);
  if (!state) return;
  const me = client.user;
  const isHost = me.role === 'host';
  const raised = state.hands.some((h) => h.uid === me.uid);
  // The label stays "Raise hand"; aria-pressed (and its style) says whether it is up.
  ui.toggle.setAttribute('aria-pressed', String(raised));
  keepingFocus(() => {
    ui.people.replaceChildren(...[...shown].map(([uid, p]) => personItem(uid, p, isHost, uid === me.uid)));
    ui.hands.replaceChildren(...state.hands.map((h, i) => handItem(h, i, isHost || h.uid === me.uid)));
  });
  ui.noHands.hidden = state.hands.length > 0;
  tick();
}

function personItem(uid, p, isHost, isMe) {
  const li = el('li', { 'data-uid': uid, 'data-status': p.label.replace(' ', '-') });
  li.append(el('span', { class: 'who' }, `${p.name}${isMe ? ' (you)' : ''}`), el('span', { class: 'role' }, p.role),
    el('span', { class: 'status' }, p.label));
  if (!isMe && p.label !== 'timed out') {
    li.append(button('Ring', 'ring', uid, `Ring ${p.name}`));
    if (isHost) li.append(button('Remove', 'remove', uid, `Remove ${p.name}`));
  }
  return li;
}

function handItem(h, index, canLower) {
  const li = el('li', { 'data-uid': h.uid });
  // The list is an <ol>, but flex items lose their markers, so the place is written out.
  li.append(el('span', { class: 'place' }, `${index + 1}.`), el('span', { class: 'who' }, h.name), ' ', el('span', { class: 'ago', 'data-raised-at': String(h.raisedAt) }));
  if (canLower) li.append(button('Lower', 'lower', h.uid, `Lower ${h.name}'s hand`));
  return li;
}

/** "raised N s ago", on the server's clock. */
function tick() {
  const now = Date.now() + clockOffsetMs;
  for (const span of ui.hands.querySelectorAll('.ago')) {
    span.textContent = `raised ${Math.max(0, Math.round((now - Number(span.dataset.raisedAt)) / 1000))} s ago`;
  }
}
setInterval(tick, 1000);

function showCall(text) {
  ui.callStatus.textContent = text;
  ui.callStatus.dataset.state = call?.state ?? 'idle';
  ui.callCancel.hidden = !(call?.direction === 'out' && call.state === 'ringing');
  ui.callEnd.hidden = call?.state !== 'accepted';
}

function endCall(text) {
  const hadFocus = ui.dialog.contains(document.activeElement) || [ui.callCancel, ui.callEnd].includes(document.activeElement);
  call.state = 'ended';
  closeDialog();
  announce(text);
  showCall(text);
  if (hadFocus) ui.toggle.focus();
}

function closeDialog() { if (ui.dialog.open) ui.dialog.close(); }

// MARK: helpers

function announce(text) {
  const p = el('p', {}, text);
  ui.announcer.append(p);
  while (ui.announcer.childElementCount > 5) ui.announcer.firstElementChild.remove();
  log(text, 'announce');
}

function log(text, kind = 'event') {
  const time = new Date().toLocaleTimeString([], { hour12: false });
  ui.log.prepend(el('li', { class: kind }, `${time} ${text}`));
  while (ui.log.childElementCount > 80) ui.log.lastElementChild.remove();
}

function describe(m) {
  const fields = ['uid', 'reason', 'callId'].filter((k) => m[k] !== undefined).map((k) => `${k}=${m[k]}`);
  return `${m.type}${m.seq !== undefined ? ` #${m.seq}` : ''} ${fields.join(' ')}`.trim();
}

function nameOf(uid) { return shown.get(uid)?.name ?? uid; }
function who(uid) { return uid === client.user.uid ? 'You' : nameOf(uid); }
function their(uid) { return uid === client.user.uid ? 'your' : 'their'; }

function button(text, action, uid, label) {
  return el('button', { type: 'button', 'data-action': action, 'data-uid': uid, 'aria-label': label }, text);
}

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Re-rendering replaces list buttons; put keyboard focus back on the matching new one. */
function keepingFocus(f) {
  const a = document.activeElement;
  const key = a?.dataset?.action ? `button[data-action="${a.dataset.action}"][data-uid="${CSS.escape(a.dataset.uid)}"]` : null;
  f();
  if (key && !document.contains(a)) document.querySelector(key)?.focus();
}

window.relayDemo = { get client() { return client; } };
