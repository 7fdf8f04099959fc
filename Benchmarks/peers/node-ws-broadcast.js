#!/usr/bin/env node
// Room broadcast WebSocket server for benchmarking relay-bots' --protocol
// broadcast: ws://HOST:PORT/<room>, every text frame a client sends goes to
// every client in that room, the sender included. Uses Debian's node-ws.
// --ping-interval MS pings every client that often (ws's documented heartbeat
// pattern), so idle connections can be compared with the relay's heartbeats.
'use strict';

const WebSocket = require('/usr/share/nodejs/ws');

function parseArgs(argv) {
  const args = { host: '127.0.0.1', port: 0, pingInterval: 0 };
  for (let i = 2; i < argv.length; i += 2) {
    if (argv[i] === '--port') args.port = Number(argv[i + 1]);
    else if (argv[i] === '--host') args.host = argv[i + 1];
    else if (argv[i] === '--ping-interval') args.pingInterval = Number(argv[i + 1]);
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!args.port) throw new Error('--port is required');
  return args;
}

const args = parseArgs(process.argv);
const rooms = new Map();
// perMessageDeflate off: measure the broadcast, not compression.
const server = new WebSocket.Server({ host: args.host, port: args.port, perMessageDeflate: false,
  maxPayload: 1 << 20 });

server.on('connection', (ws, req) => {
  const room = req.url;
  let members = rooms.get(room);
  if (!members) { members = new Set(); rooms.set(room, members); }
  members.add(ws);
  ws.on('message', (data, isBinary) => {
    for (const member of members) {
      if (member.readyState === WebSocket.OPEN) member.send(data, { binary: isBinary });
    }
  });
  ws.on('close', () => {
    members.delete(ws);
    if (members.size === 0) rooms.delete(room);
  });
});

if (args.pingInterval > 0) {
  setInterval(() => { for (const ws of server.clients) ws.ping(); }, args.pingInterval);
}

server.on('listening', () => console.log(`listening on ws://${args.host}:${args.port}`));
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => { server.close(); process.exit(0); });
