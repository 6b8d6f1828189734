"""HTTP/1.x request framing for webhook.admission.worker's event loop (pure: which part of a buffer
is one whole request, and the answers it gives a request it refuses).

The loop reads a request whole before any thread sees it; this decides, conservatively, where that
request ends, and refuses what it cannot frame the way gunicorn's parser would.
"""
from __future__ import annotations

import json

from webhook.admission.app import MAX_BODY_BYTES

MAX_HEADER_BYTES = 64 * 1024

REASONS = {100: "Continue", 400: "Bad Request", 408: "Request Timeout", 411: "Length Required",
           413: "Request Entity Too Large", 431: "Request Header Fields Too Large"}


class Frame:
    """What `frame_request` found: `end` > 0 when buf[:end] is one whole request; else `error`
    (an HTTP status and why) or neither (more bytes needed). `need` is the declared body size once
    the headers are in; `expect_continue` whether the client waits for a 100 Continue."""

    __slots__ = ("end", "error", "need", "expect_continue", "header_end")

    def __init__(self, end=0, error=None, need=None, expect_continue=False, header_end=0):
        self.end, self.error, self.need, self.expect_continue, self.header_end = end, error, need, expect_continue, header_end


def frame_request(buf, max_body: int = MAX_BODY_BYTES, max_header: int = MAX_HEADER_BYTES, start: int = 0) -> Frame:
    """Find one HTTP/1.x request at the start of `buf` (leading CRLFs already removed); `start`:
    where the end of the headers may begin (the bytes before it were searched already).

    Only the framing is decided here, conservatively (anything this cannot frame the way gunicorn's
    parser would is refused); gunicorn parses and validates the request itself afterwards, from
    exactly buf[:end], so a disagreement can make it answer 400 but never wait for more bytes."""
    head_end = buf.find(b"\r\n\r\n", max(0, start - 3), max_header + 4)
    if head_end < 0:
        if len(buf) > max_header:
            return Frame(error=(431, f"request headers over {max_header} bytes"))
        return Frame()
    lines = bytes(buf[:head_end]).split(b"\r\n")
    version = lines[0].rsplit(b" ", 1)[-1]
    length = None
    expect = False
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t"):
            return Frame(error=(400, "obsolete header line folding"))
        name, sep, value = line.partition(b":")
        if not sep:
            continue  # gunicorn rejects it; it frames nothing
        name = name.lower()
        value = value.strip(b" \t")
        if name == b"content-length":
            if not value.isdigit() or len(value) > 18:
                return Frame(error=(400, "invalid Content-Length"))
            if length is not None:
                return Frame(error=(400, "more than one Content-Length"))
            length = int(value)
        elif name == b"transfer-encoding":
            return Frame(error=(411, "send the body with a Content-Length (no Transfer-Encoding)"))
        elif name == b"expect" and value.lower() == b"100-continue":
            expect = version == b"HTTP/1.1"
    length = length or 0
    if length > max_body:
        return Frame(error=(413, f"body of {length} bytes is over {max_body}"))
    end = head_end + 4 + length
    return Frame(end=end if len(buf) >= end else 0, need=length, expect_continue=expect, header_end=head_end + 4)


def error_response(status: int, reason: str) -> bytes:
    """A complete `Connection: close` answer with the app's JSON error shape."""
    body = json.dumps({"reason": f"{status} {REASONS[status]}: {reason}"}).encode()
    return (f"HTTP/1.1 {status} {REASONS[status]}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body
