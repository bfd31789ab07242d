"""A real SMTP server on loopback (aiosmtpd) that demands STARTTLS and AUTH, with a
self-signed certificate made for 127.0.0.1; it keeps every message it accepts."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.e2e.fleet_rig import free_port

USER, PASSWORD = "gpufleet", "smtp-pass-for-tests"


@dataclass
class Mail:
    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage
    authenticated_as: str
    tls: bool


@dataclass
class MailServer:
    host: str
    port: int
    ca_file: Path
    received: list[Mail] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = message_from_bytes(envelope.content, policy=policy.default)
        login = session.auth_data.login.decode() if session.authenticated else ""
        tls = session.ssl is not None
        self.received.append(Mail(envelope.mail_from, list(envelope.rcpt_tos), message, login, tls))  # type: ignore[arg-type]
        return "250 OK"


def self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpufleet test SMTP")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "smtp.crt", directory / "smtp.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def _authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> Any:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (
        USER.encode(),
        PASSWORD.encode(),
    )
    return AuthResult(success=ok, auth_data=data)


@contextmanager
def mail_server(directory: Path) -> Iterator[MailServer]:
    cert_file, key_file = self_signed(directory)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    server = MailServer("127.0.0.1", free_port(), cert_file)
    controller = Controller(
        server,
        hostname=server.host,
        port=server.port,
        tls_context=context,
        require_starttls=True,
        auth_required=True,
        auth_require_tls=True,
        authenticator=_authenticate,
    )
    controller.start()
    try:
        yield server
    finally:
        controller.stop()
