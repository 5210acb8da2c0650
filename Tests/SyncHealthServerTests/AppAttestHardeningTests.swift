import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import SyncHealthAttest
import SyncHealthAttestTesting
import SyncHealthTestSupport
import Testing

@testable import SyncHealthServer

/// The red team's attacks on App Attest, tried over the API: each fails without its defence.
@Suite("App Attest under attack: a looping chain, unsigned floods, challenge floods")
struct AppAttestHardeningTests {
    @Test("a looping x5c of 8 and of 10 certificates is answered 4xx within a second each while /livez answers")
    func loopingChain() async throws {
        let pki = try StandInAppAttest(now: AppAttestTests.pkiNow)
        let service = AppAttestTests.service(.require, pki: pki)
        try await service.test(.live) { client in
            let device = AttestingDevice(pki: pki, deviceId: "looper")
            for count in [8, 10] {
                // The hostile attestation is made first: only the service's answer is timed.
                let challenge = try await AppAttestTests.challenge(client, appId: device.appId)
                var parts = device.key.parts()
                parts.includeIntermediate = false
                parts.extraCertificates = try StandInAppAttest.loopingCertificates(count - 1)
                let object = try device.key.attestation(challenge: challenge, parts: parts)
                let started = ContinuousClock.now
                async let attested = AppAttestTests.attest(
                    client,
                    appId: device.appId,
                    deviceId: device.deviceId,
                    keyId: device.keyId,
                    attestation: object,
                    challenge: challenge
                )
                async let live = client.execute(uri: "/livez", method: .get)
                let (answer, livez) = try await (attested, live)
                let took = ContinuousClock.now - started
                #expect(answer.status == .unauthorized, "\(count): \(String(buffer: answer.body))")
                #expect(try AppAttestTests.problemType(answer) == "attestation-chain")
                #expect(String(buffer: answer.body).contains("x5c holds \(count) certificates"))
                #expect(livez.status == .ok)
                #expect(took < .seconds(1), "\(count) certificates: \(took)")
            }
        }
    }

    @Test(
        "150 unsigned uploads naming an attested device do not use up its limit: its signed upload is accepted",
        arguments: [AppAttestMode.require, .report]
    )
    func unsignedFlood(mode: AppAttestMode) async throws {
        let pki = try StandInAppAttest(now: AppAttestTests.pkiNow)
        // The manual clock never moves: no bucket refills during the test.
        let service = AppAttestTests.service(mode, pki: pki)
        try await service.test { client in
            var device = AttestingDevice(pki: pki, deviceId: "genuine")
            #expect(try await device.attest(client).status == .created)
            var statuses: [HTTPResponse.Status: Int] = [:]
            for round in 0..<150 {
                let forged = device.body([event("forged-\(round)", #""kind": "account", "status": "available""#)])
                statuses[try await client.post(forged).status, default: 0] += 1
            }
            // require: every one refused unapplied; report: the unattested bucket runs dry at its burst (100).
            #expect(statuses == (mode == .require ? [.unauthorized: 150] : [.accepted: 100, .tooManyRequests: 50]), "\(statuses)")
            let body = device.body([event("genuine-1", #""kind": "account", "status": "available""#)])
            let signed = try await client.post(body, headers: try device.signed(body))
            #expect(signed.status == .accepted, "\(String(buffer: signed.body))")
        }
    }

    @Test("challenges and attestations are rate-limited by default, per key and per device id")
    func attestationRateLimits() async throws {
        let pki = try StandInAppAttest(now: AppAttestTests.pkiNow)
        var limits = RateLimits()
        #expect(limits.attestPerKey != nil && limits.attestPerDevice != nil)
        limits.attestPerKey = .init(perSecond: 1, burst: 6)
        let service = TestService(limits: limits, appAttest: AppAttestTests.policy(.require), appAttestVerifier: pki.verifier)
        try await service.test { client in
            var challenges: [HTTPResponse.Status] = []
            for _ in 0..<7 {
                let response = try await client.execute(
                    uri: "/v1/attest/challenge",
                    method: .post,
                    headers: SyncHealthServerTests.headers(ingestKey),
                    body: ByteBuffer(string: #"{"appId": "com.example.notes"}"#)
                )
                challenges.append(response.status)
                if response.status == .tooManyRequests { #expect(response.headers[.retryAfter] != nil) }
            }
            #expect(challenges == Array(repeating: .created, count: 6) + [.tooManyRequests])
        }
        // Per device id: the default burst of 10, then 429 however many keys or challenges the caller has.
        let perDevice = TestService(appAttest: AppAttestTests.policy(.require), appAttestVerifier: pki.verifier)
        try await perDevice.test { client in
            let device = AttestingDevice(pki: pki, deviceId: "retrier")
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<11 {
                statuses.append(
                    try await device.attest(client) { parts in parts.nonce = Array(repeating: 1, count: 32) }.status
                )
            }
            #expect(statuses == Array(repeating: .unauthorized, count: 10) + [.tooManyRequests], "\(statuses)")
        }
    }
}
