#!/usr/bin/env python3
"""A backend for the traffic tests (tests/traffic.rs): one per "pod", each on its own address
in the test's network namespace. It answers every request with 200 and a JSON object naming
itself and echoing the request: {"name", "method", "path", "host", "headers"}; request
headers as a map of lower-case names to their (last) value. Its answer carries the header
`x-backend: NAME` too, for a route's response header filter to act on.

    echo.py NAME ADDRESS PORT

Prints "ready" on stdout once it listens. Stdlib only (python3 is on every machine here).
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "gatewright-echo"
    # The head and the body go out in two writes; with Nagle's algorithm the body waits for
    # the peer's delayed ACK of the head (40 ms) on a kept-alive connection, as Traefik's are.
    disable_nagle_algorithm = True

    def answer(self):
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        body = json.dumps(
            {
                "name": self.server.name,
                "method": self.command,
                "path": self.path,
                "host": self.headers.get("host", ""),
                "headers": {k.lower(): v for k, v in self.headers.items()},
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("x-backend", self.server.name)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = answer

    def log_message(self, *args):
        pass


def main():
    name, address, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    server = ThreadingHTTPServer((address, port), Echo)
    server.daemon_threads = True
    server.name = name
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
