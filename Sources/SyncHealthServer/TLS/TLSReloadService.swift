import Logging
import ServiceLifecycle
import UnixSignals

/// Reads the TLS certificates again on every `SIGHUP`, so that a renewed certificate is served without a restart
/// (new connections get it; open ones keep theirs). A certificate that cannot be read is logged, and the one in
/// use stays.
struct TLSReloadService: Service {
    let certificates: TLSCertificates
    let logger: Logger

    func run() async throws {
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        for await _ in hangups.cancelOnGracefulShutdown() {
            do {
                try certificates.reload()
                logger.notice("Reloaded the TLS certificate", metadata: ["tls.certificate": "\(certificates.certificatePath)"])
            } catch {
                logger.error(
                    "Kept the TLS certificate in use: the new one cannot be used",
                    metadata: ["tls.certificate": "\(certificates.certificatePath)", "error": "\(error)"]
                )
            }
        }
    }
}
