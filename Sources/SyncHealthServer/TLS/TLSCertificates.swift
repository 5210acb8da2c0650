import Foundation
import NIOCore
public import NIOSSL
import Synchronization

/// The certificate chain and private key the service serves HTTPS with, read from PEM files, and read again by
/// `reload()` (on `SIGHUP`, `TLSReloadService`).
///
/// A reload changes what new connections get: every TLS handshake asks `sslContextCallback` for the chain and
/// key, and gets those loaded last. Connections already open keep theirs, so none is dropped.
public final class TLSCertificates: Sendable {
    /// The PEM file with the certificate chain, the server's certificate first.
    public let certificatePath: String
    /// The PEM file with the private key.
    public let keyPath: String
    private let current: Mutex<Loaded>

    /// A chain and its key, as read together.
    struct Loaded: Sendable {
        var chain: [NIOSSLCertificate]
        var key: NIOSSLPrivateKey

        var override: NIOSSLContextConfigurationOverride {
            var override = NIOSSLContextConfigurationOverride()
            override.certificateChain = chain.map { .certificate($0) }
            override.privateKey = .privateKey(key)
            return override
        }
    }

    /// Reads the chain and the key; throws when either cannot be read, or the key is not the certificate's.
    public init(certificatePath: String, keyPath: String) throws(TLSCertificateError) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
        current = Mutex(try Self.load(certificatePath: certificatePath, keyPath: keyPath))
    }

    /// Reads the files again. On failure the certificates in use stay, and the error says why.
    public func reload() throws(TLSCertificateError) {
        let loaded = try Self.load(certificatePath: certificatePath, keyPath: keyPath)
        current.withLock { $0 = loaded }
    }

    /// The subject of the certificate in use, for logs.
    public var subject: String {
        current.withLock { loaded in loaded.chain.first.map { String(describing: $0) } ?? "" }
    }

    /// A server configuration that serves the certificates loaded last, to each new handshake.
    public func serverConfiguration() -> TLSConfiguration {
        let loaded = current.withLock { $0 }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: loaded.chain.map { .certificate($0) },
            privateKey: .privateKey(loaded.key)
        )
        configuration.minimumTLSVersion = .tlsv12
        configuration.sslContextCallback = { [self] _, promise in
            promise.succeed(current.withLock { $0.override })
        }
        return configuration
    }

    private static func load(certificatePath: String, keyPath: String) throws(TLSCertificateError) -> Loaded {
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificatePath)
        } catch {
            throw .unreadable(path: certificatePath, reason: "\(error)")
        }
        guard !chain.isEmpty else { throw .unreadable(path: certificatePath, reason: "no certificate in the file") }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
        } catch {
            throw .unreadable(path: keyPath, reason: "\(error)")
        }
        // A context checks that the key is the certificate's, as the first handshake would.
        do {
            _ = try NIOSSLContext(
                configuration: .makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
            )
        } catch {
            throw .mismatched(certificatePath: certificatePath, keyPath: keyPath, reason: "\(error)")
        }
        return Loaded(chain: chain, key: key)
    }
}

/// Why the TLS certificates cannot be used.
public enum TLSCertificateError: Error, Equatable, CustomStringConvertible {
    /// A file cannot be read as PEM.
    case unreadable(path: String, reason: String)
    /// The key does not go with the certificate.
    case mismatched(certificatePath: String, keyPath: String, reason: String)

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): "cannot read \(path) as PEM: \(reason)"
        case .mismatched(let certificate, let key, let reason): "the key in \(key) is not the certificate's in \(certificate): \(reason)"
        }
    }
}
