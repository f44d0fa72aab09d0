"""Where a webhook may be sent: a URL given by a user is untrusted, so the gateway refuses to
post to its own machine, its cluster's network or the cloud's metadata service (SSRF).

Two checks, both pure: `url_problem` at deploy and invoke time (scheme, no userinfo, a literal
address that is not public), and `address_refusal` at delivery time, for every address the
host resolves to (the sender connects to the one it checked, so DNS cannot swap it between)."""

from __future__ import annotations

import ipaddress
from urllib.parse import SplitResult, urlsplit

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_URL_CHARS = 2048
SCHEMES = ("https", "http")


def address_refusal(address: Address) -> str | None:
    """Why no webhook may go to `address` (the kind of address it is), or None for a public one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address_refusal(address.ipv4_mapped)
    # Named kinds first, so the message says which rule refused it; `is_global` last catches
    # the rest that is not publicly routable (shared address space 100.64/10, documentation,
    # benchmarking, 6to4 of a private address).
    for kind, hit in (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
        ("not publicly routable", not address.is_global),
    ):
        if hit:
            return kind
    return None


def literal_address(host: str) -> Address | None:
    """The IP address a URL's host names literally (brackets already removed), else None."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def split_url(url: str) -> tuple[SplitResult, str] | None:
    """The URL's parts and its host, or None when it has no host a request could go to."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return parts, parts.hostname


def url_problem(url: str, *, allow_private: bool) -> tuple[str, str] | None:
    """(problem, fix) when `url` cannot be a webhook's, else None. A literal address that is not
    public is refused unless `allow_private` (the gateway's --webhook-allow-private); a host name
    is checked when a delivery resolves it."""
    if len(url) > MAX_URL_CHARS:
        return f"is {len(url)} characters long", f"use at most {MAX_URL_CHARS}"
    if not url.isprintable() or any(char.isspace() for char in url):
        return "holds a space or a control character", "percent-encode it"
    split = split_url(url)
    if split is None:
        return (
            f"{url!r} is not an absolute URL with a host and a valid port",
            "write it like https://example.com/hook",
        )
    parts, host = split
    if parts.scheme.lower() not in SCHEMES:
        return f"scheme {parts.scheme!r} is not http or https", "use an https:// (or http://) URL"
    if parts.username is not None or parts.password is not None:
        return "holds a user name or password", "remove USER:PASS@; deliveries are signed instead"
    address = literal_address(host)
    if address is not None and not allow_private:
        kind = address_refusal(address)
        if kind is not None:
            return (
                f"{host} is a {kind} address, and webhooks go only to public ones",
                "use a public host, or start the gateway with --webhook-allow-private",
            )
    return None
