import Foundation
import Hummingbird
import Logging

// The floor that `scripts/bench` measures the service's middleware and pipeline against: Hummingbird with the
// service's HTTP/1 settings and one route that reads a body and answers 202, nothing else. Built with the same
// flags as `synchealth`. Usage: bare-route PORT
let port = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 8081
let router = Router()
router.post("/v1/events") { request, _ -> Response in
    let body = try await request.body.collect(upTo: 1 << 20)
    return Response(
        status: .accepted,
        headers: [.contentType: "application/json"],
        body: .init(byteBuffer: ByteBuffer(string: #"{"accepted":\#(body.readableBytes > 0 ? 1 : 0),"duplicates":0}"#))
    )
}
router.get("/livez") { _, _ in "ok" }
var logger = Logger(label: "bare-route")
logger.logLevel = .warning
let application = Application(
    router: router,
    server: .http1(configuration: .init(idleTimeout: .seconds(60))),
    configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: "bare-route"),
    logger: logger
)
try await application.runService()
