// Declaration stubs of the SwiftUI API that SyncHealthClient calls (see CloudKit.swift beside this file).
@_exported import Foundation

@MainActor @preconcurrency
public protocol View {
    associatedtype Body: View
    @ViewBuilder @MainActor @preconcurrency var body: Self.Body { get }
}

extension Never: View {
    public typealias Body = Never
    public var body: Never { fatalError("stub") }
}

@resultBuilder
public struct ViewBuilder {
    public static func buildBlock<Content: View>(_ content: Content) -> Content { content }
    public static func buildBlock<each Content: View>(_ content: repeat each Content) -> TupleView<(repeat each Content)> { fatalError("stub") }
}

public struct TupleView<T>: View {
    public var body: Never { fatalError("stub") }
}

public protocol ShapeStyle: Sendable {}

// Color, Text and Image declare `View` in extensions, as the SDK does: their own members are not main-actor
// isolated.
public struct Color: Hashable, Sendable {
    public static let red = Color()
    public static let green = Color()
    public static let gray = Color()
}

extension Color: ShapeStyle {}

extension Color: View {
    public var body: Never { fatalError("stub") }
}

public struct Text: Equatable, Sendable {
    public init<S: StringProtocol>(_ content: S) { fatalError("stub") }
}

extension Text: View {
    public var body: Never { fatalError("stub") }
}

public struct Image: Equatable, Sendable {
    public init(systemName: String) { fatalError("stub") }
}

extension Image: View {
    public var body: Never { fatalError("stub") }
}

public struct VerticalAlignment: Sendable {
    public static let center = VerticalAlignment()
}

public struct HStack<Content: View>: View {
    nonisolated public init(alignment: VerticalAlignment = .center, spacing: CGFloat? = nil, @ViewBuilder content: () -> Content) {
        fatalError("stub")
    }
    public var body: Never { fatalError("stub") }
}

public struct ModifiedContent<Content, Modifier>: View {
    public var body: Never { fatalError("stub") }
}

extension View {
    nonisolated public func foregroundStyle<S: ShapeStyle>(_ style: S) -> ModifiedContent<Self, S> { fatalError("stub") }
}
