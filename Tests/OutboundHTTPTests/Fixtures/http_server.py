"""A small HTTP server for the OutboundHTTP tests, on 127.0.0.1 (ephemeral port).

Usage: http_server.py MODE [CERT KEY]; prints the port on stdout, serves until
stdin closes. MODE: http1 (plain HTTP/1.1), https1 (TLS, HTTP/1.1), h2 (TLS with
ALPN h2 or http/1.1), blackhole (accepts, reads, never answers).

Every answer carries x-conn (this server's number for the connection), x-method,
x-requests (requests seen on the connection so far), x-concurrent (most streams
open at once on it, HTTP/2) and x-echo-<name> for request headers named x-*; the
body echoes the request body. Paths: /status/N answers N; /big/N answers N bytes;
/slow/MS answers after MS milliseconds; /stream/N (HTTP/1.1) sends N bytes
without a length and closes; /close answers, then closes.
"""
import asyncio
import ssl
import sys

import h2.config
import h2.connection
import h2.events

conn_counter = 0


def answer(path, method, headers, body, conn, requests, concurrent):
    status, out = 200, body
    parts = path.split("/")
    if len(parts) >= 3 and parts[1] == "status":
        status = int(parts[2])
    if len(parts) >= 3 and parts[1] == "big":
        out = b"x" * int(parts[2])
    extra = [("x-conn", str(conn)), ("x-method", method), ("x-requests", str(requests)),
             ("x-concurrent", str(concurrent))]
    for name, value in headers:
        if name.lower().startswith("x-"):
            extra.append(("x-echo-" + name.lower(), value))
    return status, extra, out


def delay_of(path):
    parts = path.split("/")
    return int(parts[2]) / 1000 if len(parts) >= 3 and parts[1] == "slow" else 0


async def serve_http1(reader, writer, conn):
    requests = 0
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            break
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = [tuple(x.strip() for x in l.split(":", 1)) for l in lines[1:] if ":" in l]
        length = int(dict((k.lower(), v) for k, v in headers).get("content-length", "0"))
        body = await reader.readexactly(length) if length else b""
        requests += 1
        await asyncio.sleep(delay_of(path))
        status, extra, out = answer(path, method, headers, body, conn, requests, 1)
        if path.startswith("/stream/"):  # no length: the body ends with the connection
            writer.write(b"HTTP/1.1 200 X\r\nConnection: close\r\n\r\n" + b"y" * int(path.split("/")[2]))
            await writer.drain()
            break
        if path.startswith("/close"):  # answered, then the connection ends
            writer.write(f"HTTP/1.1 200 X\r\nContent-Length: 0\r\nConnection: close\r\nx-conn: {conn}\r\n\r\n".encode())
            await writer.drain()
            break
        resp = f"HTTP/1.1 {status} X\r\nContent-Length: {len(out)}\r\n"
        resp += "".join(f"{k}: {v}\r\n" for k, v in extra) + "\r\n"
        writer.write(resp.encode("latin-1") + out)
        await writer.drain()
    writer.close()


async def serve_h2(reader, writer, conn):
    h2c = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
    h2c.initiate_connection()
    writer.write(h2c.data_to_send())
    streams, state = {}, {"requests": 0, "open": 0, "max": 0}

    async def respond(sid, path, method, headers, body):
        await asyncio.sleep(delay_of(path))
        status, extra, out = answer(path, method, headers, body, conn, state["requests"], state["max"])
        h2c.send_headers(sid, [(":status", str(status)), ("content-length", str(len(out)))] + extra)
        h2c.send_data(sid, out, end_stream=True)
        state["open"] -= 1
        writer.write(h2c.data_to_send())

    while True:
        data = await reader.read(65536)
        if not data:
            break
        for ev in h2c.receive_data(data):
            if isinstance(ev, h2.events.RequestReceived):
                hs = [(k.decode() if isinstance(k, bytes) else k, v.decode() if isinstance(v, bytes) else v)
                      for k, v in ev.headers]
                streams[ev.stream_id] = [dict(hs), b"", [(k, v) for k, v in hs if not k.startswith(":")]]
                state["requests"] += 1
                state["open"] += 1
                state["max"] = max(state["max"], state["open"])
            elif isinstance(ev, h2.events.DataReceived):
                streams[ev.stream_id][1] += ev.data
                h2c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            if isinstance(ev, (h2.events.StreamEnded,)) or (
                    isinstance(ev, h2.events.RequestReceived) and ev.stream_ended):
                pseudo, body, hs = streams.pop(ev.stream_id)
                asyncio.ensure_future(respond(ev.stream_id, pseudo[":path"], pseudo[":method"], hs, body))
        writer.write(h2c.data_to_send())
    writer.close()


async def main():
    mode = sys.argv[1]
    ctx = None
    if mode in ("https1", "h2"):
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(sys.argv[2], sys.argv[3])
        ctx.set_alpn_protocols(["h2", "http/1.1"] if mode == "h2" else ["http/1.1"])

    async def on_conn(reader, writer):
        global conn_counter
        conn_counter += 1
        conn = conn_counter
        if mode == "blackhole":
            while await reader.read(65536):
                pass
            return
        sslobj = writer.get_extra_info("ssl_object")
        if sslobj is not None and sslobj.selected_alpn_protocol() == "h2":
            await serve_h2(reader, writer, conn)
        else:
            await serve_http1(reader, writer, conn)

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0, ssl=ctx)
    print(server.sockets[0].getsockname()[1], flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)
    server.close()


asyncio.run(main())
