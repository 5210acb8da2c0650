import ArgumentParser
import Foundation
import SyncHealthAttest

/// `synchealth app-attest`: App Attest tools for operators.
struct AppAttestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app-attest",
        abstract: "App Attest tools: check an attestation offline.",
        subcommands: [AppAttestVerify.self]
    )

    /// Bad arguments exit 2, as `verify` documents (1 is "refused").
    static let usageExitCode: Int32 = 2
}

/// `synchealth app-attest verify`: Apple's steps on one attestation, and optionally one assertion, offline.
struct AppAttestVerify: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Verify an App Attest attestation (and an assertion) offline; print one JSON object.",
        discussion: """
            Exits 0 when valid, 1 when refused (`type` names the step, with the API's problem slugs), 2 on bad \
            arguments. The attestation file holds base64 text, as the API carries it; the client-data file holds the \
            exact bytes the app signed. The root defaults to Apple's App Attestation root built into the service.
            """
    )

    @Option(name: .customLong("app-id"), help: "The App ID, TEAMID.bundleId.")
    var appId: String

    @Option(name: .customLong("key-id"), help: "The key id, base64.")
    var keyId: String

    @Option(help: "A file holding the attestation as base64 text, or - for standard input.")
    var attestation: String

    @Option(name: .customLong("client-data-hash"), help: "Exactly the bytes the app passed to attestKey, in hex.")
    var clientDataHash: String

    @Option(help: "The time to verify at (RFC 3339): a time inside the credential certificate's validity.")
    var at: String

    @Option(help: "A PEM file of the roots to trust instead of Apple's.")
    var root: String?

    @Flag(name: .customLong("allow-development"), help: "Accept keys of Apple's development environment.")
    var allowDevelopment = false

    @Option(help: "An assertion, base64, checked with the key the attestation carries.")
    var assertion: String?

    @Option(name: .customLong("client-data"), help: "A file holding the exact bytes the assertion signs, or - for standard input.")
    var clientData: String?

    @Option(name: .customLong("previous-counter"), help: "The counter accepted before the assertion (default 0).")
    var previousCounter: UInt32 = 0

    func validate() throws {
        guard (assertion == nil) == (clientData == nil) else { throw ValidationError("--assertion and --client-data go together") }
        guard attestation != "-" || clientData != "-" else { throw ValidationError("only one of --attestation and --client-data can be -") }
    }

    func run() throws {
        guard Self.identifier(appId) else { throw ValidationError("--app-id must be TEAMID.bundleId (a 10-character team id)") }
        guard let key = Data(base64Encoded: keyId), !key.isEmpty else { throw ValidationError("--key-id must be base64") }
        guard let hash = Self.hex(clientDataHash) else { throw ValidationError("--client-data-hash must be hex") }
        guard let time = Self.time(at) else { throw ValidationError("--at must be an RFC 3339 time, e.g. 2026-04-21T18:13:12Z") }
        let text = String(decoding: try Self.read(attestation, "--attestation"), as: UTF8.self).filter { !$0.isWhitespace }
        guard let object = Data(base64Encoded: text), !object.isEmpty else { throw ValidationError("--attestation must hold base64 text") }
        let verifier: AppAttestVerifier
        do {
            verifier =
                try root.map { try AppAttestVerifier(pem: String(decoding: try Self.read($0, "--root"), as: UTF8.self)) } ?? AppAttestVerifier.apple()
        } catch let error as ValidationError {
            throw error
        } catch {
            throw ValidationError("--root: no certificate could be read (\(error))")
        }
        var signed: (object: [UInt8], clientData: [UInt8], previousCounter: UInt32)?
        if let assertion, let clientData {
            guard let bytes = Data(base64Encoded: assertion), !bytes.isEmpty else { throw ValidationError("--assertion must be base64") }
            signed = (Array(bytes), Array(try Self.read(clientData, "--client-data")), previousCounter)
        }
        let report = AppAttestOfflineCheck(
            appIdentifier: appId,
            keyId: Array(key),
            attestation: Array(object),
            clientDataHash: hash,
            at: time,
            verifier: verifier,
            allowsDevelopment: allowDevelopment,
            assertion: signed
        )
        .run()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        print(String(decoding: try encoder.encode(report), as: UTF8.self))
        if !report.isValid { throw ExitCode(1) }
    }

    static func read(_ path: String, _ option: String) throws -> Data {
        if path == "-" { return FileHandle.standardInput.readDataToEndOfFile() }
        guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("\(option): cannot read \(path)") }
        return data
    }

    static func hex(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard !digits.isEmpty, digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16) else { return nil }
            out.append(byte)
        }
        return out
    }

    static func time(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }

    static func identifier(_ text: String) -> Bool {
        let parts = text.split(separator: ".", maxSplits: 1)
        return parts.count == 2 && parts[0].count == 10 && parts[0].allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } && !parts[1].isEmpty
    }
}
