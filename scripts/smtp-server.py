#!/usr/bin/env python3
"""A real SMTP server for the email tests of drift-notify, built on aiosmtpd.

It listens on 127.0.0.1 (port 0 picks a free one), with STARTTLS (required before AUTH) or
implicit TLS on the given certificate, accepts AUTH PLAIN and LOGIN for one user whose password
comes from an environment variable (never from the command line), and writes each message it
receives to MAILDIR/<n>.eml (written to a temporary name, then renamed, before the server
answers 250). Once listening it prints `listening <port>` on standard output.

Run it with the Python of the venv that scripts/install-tools.sh creates:

    $DRIFT_TOOLS_DIR/venv/bin/python scripts/smtp-server.py --cert cert.pem --key key.pem \
        --maildir /tmp/mail --user drift --password-env SMTP_TEST_PASSWORD [--tls implicit]
"""

import argparse
import asyncio
import itertools
import os
import ssl
import sys

from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword


class Maildir:
    """Writes each message to <dir>/<n>.eml."""

    def __init__(self, directory):
        self.directory = directory
        self.counter = itertools.count(1)

    async def handle_DATA(self, server, session, envelope):
        n = next(self.counter)
        tmp = os.path.join(self.directory, f".{n}.tmp")
        with open(tmp, "wb") as f:
            f.write(envelope.original_content or envelope.content)
        os.replace(tmp, os.path.join(self.directory, f"{n}.eml"))
        return "250 OK"


def authenticator(user, password):
    def check(server, session, envelope, mechanism, auth_data):
        ok = (
            isinstance(auth_data, LoginPassword)
            and auth_data.login == user.encode()
            and auth_data.password == password.encode()
        )
        return AuthResult(success=ok, handled=False)

    return check


async def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--maildir", required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password-env", required=True)
    p.add_argument("--tls", choices=["starttls", "implicit"], default="starttls")
    args = p.parse_args()
    password = os.environ.get(args.password_env)
    if not password:
        sys.exit(f"smtp-server.py: the environment variable {args.password_env} is not set")
    os.makedirs(args.maildir, exist_ok=True)

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.cert, args.key)
    handler = Maildir(args.maildir)
    auth = authenticator(args.user, password)

    def factory():
        if args.tls == "starttls":
            return SMTP(
                handler,
                hostname="localhost",
                tls_context=context,
                require_starttls=True,
                auth_require_tls=True,
                authenticator=auth,
                auth_exclude_mechanism=["CRAM-MD5"],
            )
        # Implicit TLS: the listening socket only speaks TLS, so every connection is encrypted
        # from the first byte. aiosmtpd only counts STARTTLS as TLS for auth_require_tls, so the
        # check is off here (it would hide AUTH).
        return SMTP(
            handler,
            hostname="localhost",
            auth_require_tls=False,
            authenticator=auth,
            auth_exclude_mechanism=["CRAM-MD5"],
        )

    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        factory, "127.0.0.1", args.port, ssl=context if args.tls == "implicit" else None
    )
    port = server.sockets[0].getsockname()[1]
    print(f"listening {port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
