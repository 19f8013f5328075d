"""The TLS context of an output's `tls` option (HTTPS and syslog over TLS)."""

import ssl


def context(tls: dict | None) -> ssl.SSLContext:
    """The system's authorities, or the option's own `caCert`; `verify: false` checks nothing."""
    tls = tls or {}
    made = ssl.create_default_context(cadata=tls.get("caCert"))
    if not tls.get("verify", True):
        made.check_hostname = False
        made.verify_mode = ssl.CERT_NONE
    return made
