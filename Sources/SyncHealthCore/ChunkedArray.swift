/// An array that grows by adding fixed-size chunks, so that an append never moves the elements already in it.
///
/// A Swift `Array` doubles its buffer when it is full and moves every element into the new one, in the append that
/// found it full: with a device's record in each element, under the engine's lock, that append stalls every request
/// behind it, longer at each doubling. Here the longest append allocates one chunk, and the array of chunks it may
/// grow holds one reference per `chunkSize` elements.
///
/// Indices are `0..<count`, as an array's. Elements are only appended, never inserted or removed.
///
/// Reading and writing an element are `@inlinable`: the engine's modules use it with a device's record, and
/// unspecialised they copied each record through its value witnesses (docs/benchmarks-log.md#specialised-collections).
public struct ChunkedArray<Element>: RandomAccessCollection, MutableCollection {
    /// Elements per chunk: a power of two, so that an index splits into chunk and offset with a shift and a mask.
    @inlinable public static var chunkSize: Int { 1 << chunkShift }
    @inlinable static var chunkShift: Int { 12 }

    @usableFromInline var chunks: [[Element]] = []
    /// The number of elements.
    public private(set) var count = 0

    /// An empty array.
    public init() {}

    /// The first index: 0.
    @inlinable public var startIndex: Int { 0 }
    /// One past the last index: `count`.
    @inlinable public var endIndex: Int { count }

    /// The element at `index`, which must be below `count` (the chunks' own bounds checks trap otherwise).
    @inlinable public subscript(index: Int) -> Element {
        get { chunks[index >> Self.chunkShift][index & (Self.chunkSize - 1)] }
        _modify { yield &chunks[index >> Self.chunkShift][index & (Self.chunkSize - 1)] }
    }

    /// Adds `element` at the end; its index is the `count` before the call.
    public mutating func append(_ element: Element) {
        if count & (Self.chunkSize - 1) == 0 {
            var chunk: [Element] = []
            chunk.reserveCapacity(Self.chunkSize)
            chunks.append(chunk)
        }
        chunks[chunks.count - 1].append(element)
        count += 1
    }
}

extension ChunkedArray: Sendable where Element: Sendable {}
