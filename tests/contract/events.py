"""The change events of a pass: every message published on the tenant's
channel while schemathesis runs, each checked against the ChangeEvent schema
of openapi.yaml (its `webhooks`)."""

import json
import socket
import threading

import jsonschema_rs
import yaml


class Events(threading.Thread):
    """A Redis subscriber on `unread:events:<tenant>` (RESP over a socket)."""

    def __init__(self, redis_port, tenant, password):
        super().__init__(daemon=True)
        self.socket = socket.create_connection(("127.0.0.1", redis_port))
        self.socket.sendall(f"AUTH {password}\r\nSUBSCRIBE unread:events:{tenant}\r\n".encode())
        self.reader = self.socket.makefile("rb")
        self.read_reply()  # AUTH's +OK
        self.read_reply()  # the subscription's confirmation
        self.messages = []

    def read_reply(self):
        line = self.reader.readline().rstrip(b"\r\n")
        kind, rest = line[:1], line[1:]
        if kind == b"*":
            return [self.read_reply() for _ in range(int(rest))]
        if kind == b"$":
            data = self.reader.read(int(rest) + 2)[:-2]
            return data
        if kind == b":":
            return int(rest)
        if kind == b"":
            raise EOFError
        return rest

    def run(self):
        try:
            while True:
                reply = self.read_reply()
                if isinstance(reply, list) and reply[0] == b"message":
                    self.messages.append(reply[2])
        except (EOFError, OSError, ValueError):
            pass

    def stop(self):
        self.socket.close()
        self.join(timeout=5)
        return self.messages


def problems(messages, openapi_path, large=False):
    """What is wrong with the published events (none published is wrong too;
    with `large`, none of a large conversation too)."""
    with open(openapi_path) as file:
        document = yaml.safe_load(file)
    schema = {"$ref": "#/components/schemas/ChangeEvent", "components": document["components"]}
    validator = jsonschema_rs.validator_for(schema)
    found = []
    if not messages:
        found.append("no change event was published")
    large_seen = False
    for message in messages:
        try:
            event = json.loads(message)
        except ValueError:
            found.append(f"not JSON: {message[:200]!r}")
            continue
        large_seen |= isinstance(event, dict) and event.get("large") is True
        for error in validator.iter_errors(event):
            found.append(f"{event}: {error.message}")
    if large and not large_seen:
        found.append("no large conversation's event was published")
    return found[:20]
