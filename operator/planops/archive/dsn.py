"""What the operator may say of its archive's DSN in a log line: never its password. Pure: no
database driver.

libpq's errors quote pieces of a DSN it cannot read: `invalid percent-encoded token: "<the URL's
password>"`, `missing "=" after "<a word of a password with a space>"`, the whole URL of an IPv6
host it cannot parse. So an error is redacted before it is logged, whatever the DSN's form
(a URL, `postgresql://user:password@host/db?password=...`, or key=value words, `password=...`,
quoted or not), and however malformed: every piece of text that may be the password (as written,
percent-decoded, and each of its words) is replaced wherever it appears, so is any quoted
fragment of the error made of such pieces, and so is whatever looks like a password in any DSN
the error spells out. Redacting too much costs a less precise log line; too little, a secret.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

#: what replaces a secret
MASK = "***"
#: the shortest word of a password replaced wherever it appears (a shorter one only when quoted:
#: "a" everywhere would make the line unreadable)
MIN_WORD = 4

_URL = re.compile(r"^\s*postgres(?:ql)?://", re.IGNORECASE)
#: `password=` as a keyword (key=value) or a URL's query parameter
_PASSWORD_KEY = re.compile(r"(?:^|[\s?&])password\s*=\s*", re.IGNORECASE)
#: the next keyword of key=value words: where an unquoted value ends at the latest
_NEXT_KEYWORD = re.compile(r"\s+[A-Za-z_]+\s*=")
#: in an error's text: a DSN's password keyword or a URL's user:password@
_SAID_KEYWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s&]*)", re.IGNORECASE)
_SAID_USERINFO = re.compile(r"(://[^:/@\s]*):[^\s]*@")
#: a quoted fragment of an error (libpq quotes what it cannot read)
_QUOTED = re.compile(r"\"([^\"]*)\"|'([^']*)'")


def _keyword_values(dsn: str) -> list[str]:
    """Every text a `password=` of the DSN may have meant: to the closing quote (or the end);
    else, in a URL's query, to the next `&`, and in key=value words, to the next keyword."""
    found = []
    url = _URL.match(dsn) is not None
    for m in _PASSWORD_KEY.finditer(dsn):
        rest = dsn[m.end() :]
        if rest.startswith("'"):
            close = re.search(r"(?<!\\)'", rest[1:])
            value = rest[1 : 1 + close.start()] if close else rest[1:]
            found += [value, re.sub(r"\\(.)", r"\1", value)]  # as written, and unescaped
        elif url:
            found.append(re.split(r"[&#]", rest, maxsplit=1)[0])
        else:
            keyword = _NEXT_KEYWORD.search(rest)
            found.append(rest[: keyword.start()] if keyword else rest)
    return found


def _userinfo_password(dsn: str) -> list[str]:
    """A URL's password: what follows the user's `:` up to the last `@` (a password with an
    unescaped `@` or `/` is not cut short)."""
    m = _URL.match(dsn)
    if m is None:
        return []
    rest = dsn[m.end() :]
    at = rest.rfind("@")
    if at < 0 or ":" not in rest[:at]:
        return []
    password = rest[:at].split(":", 1)[1]
    slash = password.find("/")
    return [password, password[:slash]] if slash > 0 else [password]


def secrets(dsn: str) -> set[str]:
    """Every text of the DSN that may be its password, or part of one: as written,
    percent-decoded, and each word of it."""
    found: set[str] = set()
    for value in [*_userinfo_password(dsn), *_keyword_values(dsn)]:
        for text in (value, unquote(value)):
            if text.strip():
                found.add(text)
                found.update(text.split())
    return found


def redacted(text: str, dsn: str | None) -> str:
    """`text` (an error, a traceback) with no piece of the DSN's password in it."""
    if dsn:
        pieces = secrets(dsn)
        for piece in sorted(pieces, key=len, reverse=True):
            if len(piece) >= MIN_WORD:
                text = text.replace(piece, MASK)

        def quoted(m: re.Match[str]) -> str:
            inner = m.group(1) if m.group(1) is not None else m.group(2)
            words = set(re.split(r"[\s=]+", inner)) - {""}
            secret = inner and (any(inner in p for p in pieces) or any(w in pieces for w in words))
            return m.group(0)[0] + MASK + m.group(0)[-1] if secret else m.group(0)

        text = _QUOTED.sub(quoted, text)
    text = _SAID_USERINFO.sub(lambda m: f"{m.group(1)}:{MASK}@", text)
    return _SAID_KEYWORD.sub(lambda m: f"{m.group(1)}{MASK}", text)
