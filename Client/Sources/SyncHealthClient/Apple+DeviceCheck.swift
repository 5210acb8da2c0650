#if canImport(DeviceCheck) && canImport(CryptoKit)
import CryptoKit
import DeviceCheck
import Foundation

/// App Attest through `DCAppAttestService.shared`.
struct DeviceCheckAppAttest: AppAttestProvider {
    var isSupported: Bool { DCAppAttestService.shared.isSupported }

    func generateKey() async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            DCAppAttestService.shared.generateKey { keyId, error in
                continuation.resume(with: Self.result(keyId, error))
            }
        }
    }

    func attestKey(_ keyId: String, clientData: Data) async throws -> Data {
        let hash = Data(SHA256.hash(data: clientData))
        return try await withCheckedThrowingContinuation { continuation in
            DCAppAttestService.shared.attestKey(keyId, clientDataHash: hash) { attestation, error in
                continuation.resume(with: Self.result(attestation, error))
            }
        }
    }

    func generateAssertion(_ keyId: String, clientData: Data) async throws -> Data {
        let hash = Data(SHA256.hash(data: clientData))
        return try await withCheckedThrowingContinuation { continuation in
            DCAppAttestService.shared.generateAssertion(keyId, clientDataHash: hash) { assertion, error in
                continuation.resume(with: Self.result(assertion, error))
            }
        }
    }

    /// A completion handler's pair as a result, `DCError`s as the reporter's own: `invalidKey` (a spent or lost key),
    /// `serverUnavailable` (try the same key and challenge later), `featureUnsupported` (App Attest is not here).
    static func result<T: Sendable>(_ value: T?, _ error: (any Error)?) -> Result<T, any Error> {
        if let error {
            guard let deviceCheck = error as? DCError else { return .failure(error) }
            switch deviceCheck.code {
            case .invalidKey: return .failure(AppAttestInvalidKey())
            case .serverUnavailable: return .failure(AppAttestServerUnavailable())
            case .featureUnsupported: return .failure(AppAttestUnsupported())
            default: return .failure(error)
            }
        }
        guard let value else { return .failure(DCError(.unknownSystemFailure)) }
        return .success(value)
    }
}
#endif
