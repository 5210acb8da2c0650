"""A stand-in for Apple's App Attest in Python (the `cryptography` package): a root and intermediate of its own, and
a device key that attests and signs uploads as a device's Secure Enclave key does. The server accepts it when its
`SYNCHEALTH_APP_ATTEST_ROOT` is `root_pem()`. The Swift twin is Sources/SyncHealthAttestTesting."""
import base64, datetime, hashlib, struct

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def cbor(value):
    """Definite-length CBOR of dicts (text keys), lists, str, bytes and non-negative ints."""
    def head(major, n):
        if n < 24:
            return bytes([major << 5 | n])
        for info, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
            if n < 1 << (8 * size):
                return bytes([major << 5 | info]) + n.to_bytes(size, "big")
    if isinstance(value, bytes):
        return head(2, len(value)) + value
    if isinstance(value, str):
        data = value.encode()
        return head(3, len(data)) + data
    if isinstance(value, int):
        return head(0, value)
    if isinstance(value, list):
        return head(4, len(value)) + b"".join(cbor(v) for v in value)
    if isinstance(value, dict):
        return head(5, len(value)) + b"".join(cbor(k) + cbor(v) for k, v in value.items())
    raise TypeError(type(value))


def _name(text):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


def _certificate(subject, issuer, public_key, issuer_key, ca, extensions=(), leaf=False):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=3)))
    if ca:
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        builder = builder.add_extension(x509.KeyUsage(False, False, False, False, False, True, False, False, False), critical=True)
    if leaf:
        # As Apple writes a credential certificate: not a CA, a signing key.
        builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        builder = builder.add_extension(x509.KeyUsage(True, True, True, True, False, False, False, False, False), critical=True)
    for extension in extensions:
        builder = builder.add_extension(extension, critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


class StandInAppAttest:
    def __init__(self):
        self.root_key = ec.generate_private_key(ec.SECP256R1())
        self.root = _certificate(_name("Stand-in App Attestation Root CA"), _name("Stand-in App Attestation Root CA"),
                                 self.root_key.public_key(), self.root_key, ca=True)
        self.ca_key = ec.generate_private_key(ec.SECP256R1())
        self.ca = _certificate(_name("Stand-in App Attestation CA 1"), self.root.subject, self.ca_key.public_key(), self.root_key, ca=True)

    def root_pem(self):
        return self.root.public_bytes(serialization.Encoding.PEM).decode()


class Device:
    """One install's key for `app_identifier` (TEAMID.bundleId)."""

    def __init__(self, pki, app_identifier):
        self.pki = pki
        self.rp_id_hash = hashlib.sha256(app_identifier.encode()).digest()
        self.key = ec.generate_private_key(ec.SECP256R1())
        point = self.key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
        self.key_id = hashlib.sha256(point).digest()
        self.counter = 0

    @property
    def key_id_b64(self):
        return base64.b64encode(self.key_id).decode()

    def attestation(self, challenge):
        # The devices' layout: flags 0x40, counter 0, the aaguid, the credential id, then the COSE key (EC2, ES256,
        # P-256: {1: 2, 3: -7, -1: 1, -2: x, -3: y}, written in that order as devices do).
        point = self.key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
        cose = b"\xa5\x01\x02\x03\x26\x20\x01\x21\x58\x20" + point[1:33] + b"\x22\x58\x20" + point[33:65]
        auth = (self.rp_id_hash + b"\x40" + struct.pack(">I", 0) + b"appattest" + b"\0" * 7 + struct.pack(">H", 32) + self.key_id
                + cose)
        nonce = hashlib.sha256(auth + hashlib.sha256(challenge).digest()).digest()
        value = b"\x30\x24\xa1\x22\x04\x20" + nonce
        extension = x509.UnrecognizedExtension(x509.ObjectIdentifier("1.2.840.113635.100.8.2"), value)
        credential = _certificate(_name(self.key_id.hex()), self.pki.ca.subject, self.key.public_key(), self.pki.ca_key, ca=False,
                                  extensions=[extension], leaf=True)
        der = lambda c: c.public_bytes(serialization.Encoding.DER)
        return cbor({"fmt": "apple-appattest", "attStmt": {"x5c": [der(credential), der(self.pki.ca)], "receipt": b"stand-in"},
                     "authData": auth})

    def assertion(self, body):
        """The assertion over `body` (the bytes sent), with the next counter."""
        self.counter += 1
        # 37 bytes with flags 0x40 and no credential after them, as devices write an assertion's.
        auth = self.rp_id_hash + b"\x40" + struct.pack(">I", self.counter)
        nonce = hashlib.sha256(auth + hashlib.sha256(body).digest()).digest()
        signature = self.key.sign(nonce, ec.ECDSA(hashes.SHA256()))
        return cbor({"signature": signature, "authenticatorData": auth})
