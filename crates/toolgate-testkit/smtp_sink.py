#!/usr/bin/env python3
"""An SMTP server for tests that keeps every message it receives.

Usage: smtp_sink.py DIR [--port PORT]

Listens on 127.0.0.1 (PORT, default 0: any free port) with aiosmtpd's
Controller, prints the bound port on its own line on stdout, and writes each
received message into DIR as NNNNNN.json, `{"from", "to": [...], "data",
"subject", "headers": [[name, value], ...], "text", "html"}` (envelope sender,
envelope recipients, the raw message, then its decoded subject, headers and
text/plain and text/html bodies), renamed into place once complete. It exits when its standard input closes (the test process
ended) or on SIGTERM.

Exits with status 3 and a message on stderr when aiosmtpd is not installed.
"""

import argparse
import email
import email.policy
import json
import os
import signal
import socket
import sys
import threading

try:
    from aiosmtpd.controller import Controller
except ImportError:
    sys.stderr.write(
        "aiosmtpd is not installed for this python3: "
        "run `bash scripts/setup-local-model.sh --packages-only`\n"
    )
    sys.exit(3)


class Sink:
    """Writes each message to a numbered JSON file in a directory."""

    def __init__(self, directory):
        self.directory = directory
        self.count = 0
        self.lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):
        with self.lock:
            self.count += 1
            number = self.count
        raw = envelope.original_content or envelope.content or b""
        if isinstance(raw, str):
            raw = raw.encode("utf-8")
        record = {"from": envelope.mail_from, "to": list(envelope.rcpt_tos)}
        record["data"] = raw.decode("utf-8", errors="replace")
        record.update(parse(raw))
        final = os.path.join(self.directory, "%06d.json" % number)
        partial = final + ".partial"
        with open(partial, "w", encoding="utf-8") as out:
            json.dump(record, out)
        os.replace(partial, final)
        return "250 OK: kept as %06d" % number


def parse(raw):
    """The decoded subject, headers and text and HTML bodies of a message."""
    try:
        message = email.message_from_bytes(raw, policy=email.policy.default)
        text = message.get_body(preferencelist=("plain",))
        html = message.get_body(preferencelist=("html",))
        return {
            "subject": str(message.get("subject", "")),
            "headers": [[name, str(value)] for name, value in message.items()],
            "text": text.get_content() if text is not None else None,
            "html": html.get_content() if html is not None else None,
        }
    except Exception as error:  # keep the raw message even when it does not parse
        return {"subject": "", "headers": [], "text": None, "html": None, "parse_error": repr(error)}


class BoundController(Controller):
    """A Controller serving on a socket bound beforehand, so port 0 works."""

    def __init__(self, handler, sock, **kwargs):
        self._sock = sock
        host, port = sock.getsockname()[:2]
        super().__init__(handler, hostname=host, port=port, **kwargs)

    def _create_server(self):
        return self.loop.create_server(self._factory_invoker, sock=self._sock, ssl=self.ssl_context)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", help="where received messages are written")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    controller = BoundController(Sink(args.dir), sock)
    controller.start()
    print(controller.port, flush=True)

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    controller.stop()


if __name__ == "__main__":
    main()
