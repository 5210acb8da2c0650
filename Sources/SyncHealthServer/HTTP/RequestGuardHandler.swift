import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// Sits in each connection's pipeline right after HTTP decoding, and answers what never reaches the router:
///
/// - an HTTP parse error (oversized headers, malformed requests, an HTTP/1.0 request with `Transfer-Encoding`, which
///   `HTTP10FramingHandler` catches before the version is lost) gets problem+json, `431` for oversized headers and
///   `400` otherwise, then the connection closes;
/// - a request that has not arrived in full within `requestTimeout` of the connection opening or of the
///   previous response (a client trickling bytes) gets `408` problem+json, then the connection closes;
/// - a kept-alive connection on which no new request began within `requestTimeout` of the previous response is
///   closed without an answer: a `408` there would be read as the answer to the client's next request.
///   (This handler sees parsed parts: a request whose head is still trickling in looks idle and is closed too.)
///
/// The timer is lazy: a request only moves `deadline`, and the one scheduled task, when it fires early, schedules
/// itself again for the deadline: scheduling and cancelling a task for every request was a visible share of a
/// trivial request's CPU.
final class RequestGuardHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let requestTimeout: TimeAmount
    /// The one pending check, if any. It may fire before `deadline`.
    private var timer: Scheduled<Void>?
    /// When the request being awaited must have arrived; `nil` while one is being answered.
    private var deadline: NIODeadline?
    private var closing = false
    /// Whether a response has been sent on this connection.
    private var answeredOne = false
    /// Whether the head of the request being awaited has arrived.
    private var headSeen = false

    init(requestTimeout: TimeAmount) {
        self.requestTimeout = requestTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // Hummingbird adds its extra handlers after the conversion to HTTPTypes' parts; the framing check must come
        // before it. Without that conversion in the pipeline (a handler test) there is nothing to check.
        try? HTTP10FramingHandler.install(in: context.pipeline.syncOperations)
        if context.channel.isActive { arm(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            headSeen = true
        case .end:
            // The request is complete: the deadline is met. It starts again after the response.
            deadline = nil
        case .body:
            break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data), !closing {
            answeredOne = true
            headSeen = false
            arm(context)
        }
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is HTTP10FramingHandler.FaultyFraming {
            respond(
                context,
                problem: Problem(
                    slug: "malformed-request",
                    title: "Malformed HTTP request",
                    status: .badRequest,
                    detail: "An HTTP/1.0 request cannot carry Transfer-Encoding (RFC 9112 §6.1): send HTTP/1.1, or Content-Length."
                )
            )
            return
        }
        guard let parserError = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        let tooLarge = parserError == .headerOverflow
        respond(
            context,
            problem: Problem(
                slug: tooLarge ? "headers-too-large" : "malformed-request",
                title: tooLarge ? "Request header fields too large" : "Malformed HTTP request",
                status: tooLarge ? .requestHeaderFieldsTooLarge : .badRequest,
                detail: tooLarge ? "The request's headers are larger than the server accepts." : "The request is not valid HTTP/1.1."
            )
        )
    }

    /// Starts waiting for a request: one `requestTimeout` from now.
    private func arm(_ context: ChannelHandlerContext) {
        let due = NIODeadline.now() + requestTimeout
        deadline = due
        if timer == nil { schedule(context, at: due) }
    }

    private func schedule(_ context: ChannelHandlerContext, at due: NIODeadline) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: due) {
            let (handler, context) = bound.value
            handler.timer = nil
            handler.check(context)
        }
    }

    private func check(_ context: ChannelHandlerContext) {
        // No request awaited: the next `arm` schedules again.
        guard let deadline, !closing else { return }
        if deadline > .now() {
            schedule(context, at: deadline)
            return
        }
        self.deadline = nil
        if answeredOne && !headSeen {
            closing = true
            context.close(promise: nil)
            return
        }
        respond(
            context,
            problem: Problem(
                slug: "request-timeout",
                title: "Request timeout",
                status: .requestTimeout,
                detail: "The request did not arrive in full in time; the connection is closed."
            )
        )
    }

    /// Writes a problem+json response and closes the connection.
    private func respond(_ context: ChannelHandlerContext, problem: Problem) {
        guard !closing else { return }
        closing = true
        timer?.cancel()
        timer = nil
        let body = (try? JSONResponse.encoder.encode(problem)) ?? Data()
        var fields = HTTPFields()
        fields[.contentType] = "application/problem+json"
        fields[.contentLength] = String(body.count)
        fields[.connection] = "close"
        context.write(wrapOutboundOut(.head(HTTPResponse(status: .init(code: problem.status), headerFields: fields))), promise: nil)
        context.write(wrapOutboundOut(.body(ByteBuffer(bytes: body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in context.close(promise: nil) }
    }
}
