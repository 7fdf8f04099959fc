// Node's `ws` (Debian's node-ws) over wss:// against the relay's TLS listener:
// hello, join, an app message echoed back as a session event. Exit 0 on success.
const fs = require("fs");
const WebSocket = require("ws");

const url = process.env.RELAY_WSS;
const ca = fs.readFileSync(process.env.RELAY_CA);
const timer = setTimeout(() => { console.error("timed out"); process.exit(2); }, 20000);
const ws = new WebSocket(url + "/v1/ws", ["relay.v1"], { ca });
const seen = [];
ws.on("open", () => {
  ws.send(JSON.stringify({ type: "hello", dev: { uid: "node", name: "Node" } }));
  ws.send(JSON.stringify({ type: "session.join", id: "j", session: "tls" }));
  ws.send(JSON.stringify({ type: "message.send", session: "tls", data: { over: "tls" } }));
});
ws.on("message", (data) => {
  const m = JSON.parse(data.toString());
  seen.push(m.type);
  if (m.type === "message" && m.data.over === "tls") {
    console.log(JSON.stringify({ seen, protocol: ws.protocol }));
    clearTimeout(timer);
    ws.close(1000);
  }
});
ws.on("close", () => process.exit(seen.includes("message") ? 0 : 1));
ws.on("error", (e) => { console.error(String(e)); process.exit(1); });
