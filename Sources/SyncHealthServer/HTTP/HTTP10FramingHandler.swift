import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// Refuses an HTTP/1.0 request that carries `Transfer-Encoding`. RFC 9112 §6.1: such a message's framing is faulty,
/// and a server that decodes it as chunked reads a body that a proxy in front, which may frame it by
/// `Content-Length` or by the connection's end, does not: the shape of request smuggling. SwiftNIO's decoder decodes
/// it, and the HTTP/1.0 version is gone once the parts become HTTPTypes' (which have none), so this handler sits
/// before that conversion. `RequestGuardHandler` answers the error with `400` problem+json and closes the connection.
final class HTTP10FramingHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    /// The error this handler raises.
    struct FaultyFraming: Error, Equatable {}

    /// Whether the connection is being refused: nothing more is read on it.
    private var refusing = false

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refusing else { return }
        if case .head(let head) = unwrapInboundIn(data), head.version.major == 1, head.version.minor == 0,
            head.headers.contains(name: "transfer-encoding")
        {
            refusing = true
            context.fireErrorCaught(FaultyFraming())
            return
        }
        context.fireChannelRead(data)
    }

    /// Adds the handler right before the conversion to HTTPTypes' parts, where the request's version is still known.
    static func install(in pipeline: ChannelPipeline.SynchronousOperations) throws {
        let codec = try pipeline.context(handlerType: HTTP1ToHTTPServerCodec.self)
        try pipeline.addHandler(HTTP10FramingHandler(), position: .before(codec.handler))
    }
}
