import HTTPTypes

extension HTTPFields {
    /// `self[name]`, without building a new string for a field that appears once, as it does in nearly every
    /// request. The subscript joins the values through a lazy sequence even for one, and every request reads
    /// `Authorization` (docs/benchmarks-log.md#specialised-collections).
    func value(_ name: HTTPField.Name) -> String? {
        guard let first = firstIndex(where: { $0.name == name }) else { return nil }
        if self[index(after: first)...].contains(where: { $0.name == name }) { return self[name] }
        return self[first].value
    }
}

extension String {
    /// Whether the string starts with `prefix` (written in lowercase), ASCII letters compared without case (a
    /// header value's media type), without building a lowercased copy: it runs on every request.
    func hasPrefixIgnoringASCIICase(_ prefix: StaticString) -> Bool {
        let candidate = utf8
        return prefix.withUTF8Buffer { expected in
            candidate.count >= expected.count
                && zip(candidate, expected).allSatisfy { a, b in a == b || (a >= UInt8(ascii: "A") && a <= UInt8(ascii: "Z") && a + 32 == b) }
        }
    }
}
