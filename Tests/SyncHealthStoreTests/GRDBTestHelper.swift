import GRDB

/// Opens a database directly, to damage it in tests.
struct GRDBTestHelper {
    let queue: DatabaseQueue
    static func open(_ path: String) throws -> GRDBTestHelper { GRDBTestHelper(queue: try DatabaseQueue(path: path)) }
    func execute(_ sql: String) throws { try queue.write { try $0.execute(sql: sql) } }
}
