// libFuzzer target over what a device controls in App Attest before any signature is checked: the CBOR of an
// attestation or assertion and the authenticator data inside it. Built by scripts/fuzz with
// `swiftc -sanitize=fuzzer,address` together with SyncHealthAttest's parsing sources (no crypto).

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAppAttest(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: start, count: count))
    // Any bytes are also tried as authenticator data, in both layouts: it reads or throws, never traps.
    if let auth = try? AuthenticatorData(assertion: bytes) {
        // What it reads, written back, reads the same.
        guard let again = try? AuthenticatorData(assertion: auth.bytes), again == auth else { fatalError("an assertion's data did not round-trip") }
    }
    if let auth = try? AuthenticatorData(attestation: bytes) {
        guard let again = try? AuthenticatorData(attestation: auth.bytes), again == auth else {
            fatalError("an attestation's data did not round-trip")
        }
    }
    guard let value = try? CBORValue.decode(bytes) else { return 0 }
    // A document that reads, written in CBOR's preferred form, reads back as the same value.
    guard let reread = try? CBORValue.decode(value.encoded()), reread == value else { fatalError("CBOR did not round-trip") }
    // The fields the verifier looks up are looked up safely, whatever the shape.
    for field in ["fmt", "attStmt", "authData", "signature", "authenticatorData"] {
        if let bytes = value[field]?.byteString {
            _ = try? AuthenticatorData(assertion: bytes)
            _ = try? AuthenticatorData(attestation: bytes)
        }
        _ = value["attStmt"]?["x5c"]
    }
    return 0
}
