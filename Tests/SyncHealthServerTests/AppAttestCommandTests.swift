import Foundation
import Testing

/// `synchealth app-attest verify`, run as an operator runs it, on the genuine vectors of the shared reference data.
@Suite("synchealth app-attest verify: one JSON object, and 0 valid, 1 refused, 2 bad arguments")
struct AppAttestCommandTests {
    static var vectors: [[String: Any]] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("SyncHealthAttestTests/Fixtures/genuine-vectors.json")
        guard let data = try? Data(contentsOf: url) else { return [] }
        return (try? JSONSerialization.jsonObject(with: data) as? [[String: Any]]) ?? []
    }

    /// Runs the binary with `arguments`, `input` on standard input; its status and standard output.
    func run(_ arguments: [String], input: Data = Data()) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = builtBinary()
        process.arguments = ["app-attest", "verify"] + arguments
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        try process.run()
        stdin.fileHandleForWriting.write(input)
        try stdin.fileHandleForWriting.close()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }

    func arguments(_ vector: [String: Any], attestation: String) -> [String] {
        [
            "--app-id", vector["appId"] as? String ?? "", "--key-id", vector["keyIdBase64"] as? String ?? "",
            "--attestation", attestation, "--client-data-hash", vector["clientDataHashHex"] as? String ?? "",
            "--at", vector["verifyAt"] as? String ?? "", "--allow-development",
        ]
    }

    @Test("each vector is valid (the attestation from standard input, and the assertion from a file); a changed hash is refused")
    func vectors() throws {
        #expect(Self.vectors.count == 2)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("attest-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for vector in Self.vectors {
            let attestation = Data((vector["attestationBase64"] as? String ?? "").utf8)
            var args = arguments(vector, attestation: "-")
            if let assertion = vector["assertion"] as? [String: Any] {
                let clientData = directory.appendingPathComponent("client-data")
                try Data((assertion["clientDataUtf8"] as? String ?? "").utf8).write(to: clientData)
                args += ["--assertion", assertion["assertionBase64"] as? String ?? "", "--client-data", clientData.path]
            }
            let valid = try run(args, input: attestation)
            #expect(valid.status == 0, "\(valid.output)")
            let report = try JSONSerialization.jsonObject(with: Data(valid.output.utf8)) as? [String: Any]
            #expect(report?["result"] as? String == "valid")
            #expect(report?["keyId"] as? String == vector["keyIdBase64"] as? String)

            var changed = arguments(vector, attestation: "-")
            let hash = changed[7]
            changed[7] = (hash.first == "0" ? "1" : "0") + hash.dropFirst()
            let refused = try run(changed, input: attestation)
            #expect(refused.status == 1)
            let refusal = try JSONSerialization.jsonObject(with: Data(refused.output.utf8)) as? [String: Any]
            #expect(refusal?["result"] as? String == "refused")
            #expect(refusal?["type"] as? String == "attestation-nonce")
        }
    }

    @Test("bad arguments exit 2 and print no report")
    func badArguments() throws {
        let vector = try #require(Self.vectors.first)
        var noHex = arguments(vector, attestation: "-")
        noHex[7] = "zz"
        for args in [noHex, ["--app-id", "x"], arguments(vector, attestation: "/nonexistent/attestation")] {
            let result = try run(args)
            #expect(result.status == 2, "\(args)")
            #expect(result.output.isEmpty)
        }
    }
}
