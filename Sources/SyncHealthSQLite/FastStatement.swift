import GRDB
import GRDBSQLite
import SyncHealthStore

/// A cached statement bound and stepped through the SQLite C API. The per-event and per-device writes of a group
/// commit run through it: GRDB's general binding (an array of boxed values per call) was a tenth of the
/// writer's time.
struct FastStatement {
    let statement: Statement
    let db: Database

    init(_ db: Database, _ sql: String) throws {
        self.db = db
        statement = try db.cachedStatement(sql: sql)
    }

    /// A value to bind.
    enum Value {
        case int(Int64)
        case text(String)
        case blob([UInt8])
        case null
    }

    /// The current row of a query, read by column index.
    struct Columns {
        let raw: OpaquePointer

        func int(_ column: Int32) -> Int64 { sqlite3_column_int64(raw, column) }

        func isNull(_ column: Int32) -> Bool { sqlite3_column_type(raw, column) == SQLITE_NULL }

        /// The column's bytes (text or blob); empty for NULL.
        func bytes(_ column: Int32) -> [UInt8] {
            let count = Int(sqlite3_column_bytes(raw, column))
            guard count > 0, let base = sqlite3_column_blob(raw, column) else { return [] }
            return Array(UnsafeRawBufferPointer(start: base, count: count))
        }
    }

    /// Binds `values` to the parameters in order and runs the statement; returns how many rows it changed.
    @discardableResult
    func run(_ values: Value...) throws -> Int32 {
        try run(values)
    }

    /// Binds `values` to the parameters in order and runs the statement; returns how many rows it changed.
    @discardableResult
    func run(_ values: [Value]) throws -> Int32 {
        let raw = statement.sqliteStatement
        var code = bind(values)
        if code == SQLITE_OK { code = sqlite3_step(raw) }
        sqlite3_reset(raw)
        guard code == SQLITE_DONE else { throw error(code) }
        return sqlite3_changes(db.sqliteConnection)
    }

    /// Binds parameters where they lie, for one run: what `Binder` binds must stay valid until `bind`'s caller is done
    /// with the run, and the bindings are cleared before it returns.
    struct Binder {
        let raw: OpaquePointer

        func int(_ index: Int32, _ value: Int64) -> Int32 { sqlite3_bind_int64(raw, index, value) }

        func blob(_ index: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
            // A null pointer would bind NULL, not an empty blob. A nil destructor is SQLITE_STATIC: no copy.
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return sqlite3_bind_zeroblob(raw, index, 0) }
            return sqlite3_bind_blob(raw, index, base, Int32(bytes.count), nil)
        }
    }

    /// Binds the parameters with `bind` (many at once, without copies) and runs the statement; returns how many rows
    /// it changed.
    @discardableResult
    func run(_ bind: (Binder) -> Int32) throws -> Int32 {
        let raw = statement.sqliteStatement
        sqlite3_reset(raw)
        var code = bind(Binder(raw: raw))
        if code == SQLITE_OK { code = sqlite3_step(raw) }
        sqlite3_reset(raw)
        // The statement is cached: it must not keep pointers into memory its caller is about to let go.
        sqlite3_clear_bindings(raw)
        guard code == SQLITE_DONE else { throw error(code) }
        return sqlite3_changes(db.sqliteConnection)
    }

    /// Binds `values` and calls `row` for each row the statement returns.
    func query(_ values: Value..., row: (Columns) throws -> Void) throws {
        let raw = statement.sqliteStatement
        defer { sqlite3_reset(raw) }
        var code = bind(values)
        while code == SQLITE_OK || code == SQLITE_ROW {
            code = sqlite3_step(raw)
            if code == SQLITE_ROW { try row(Columns(raw: raw)) }
        }
        guard code == SQLITE_DONE else { throw error(code) }
    }

    private func bind(_ values: [Value]) -> Int32 {
        let raw = statement.sqliteStatement
        sqlite3_reset(raw)
        // SQLITE_TRANSIENT: SQLite copies text and blobs before the bind call returns.
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        var code = SQLITE_OK
        for (i, value) in values.enumerated() where code == SQLITE_OK {
            let index = Int32(i + 1)
            switch value {
            case .int(let v):
                code = sqlite3_bind_int64(raw, index, v)
            case .text(var v):
                code = v.withUTF8 { text -> Int32 in
                    guard let base = text.baseAddress else { return sqlite3_bind_text(raw, index, "", 0, transient) }
                    return base.withMemoryRebound(to: CChar.self, capacity: text.count) {
                        sqlite3_bind_text(raw, index, $0, Int32(text.count), transient)
                    }
                }
            case .blob(let v):
                // A null pointer would bind NULL, not an empty blob.
                code =
                    v.isEmpty
                    ? sqlite3_bind_zeroblob(raw, index, 0)
                    : v.withUnsafeBytes { sqlite3_bind_blob(raw, index, $0.baseAddress, Int32($0.count), transient) }
            case .null:
                code = sqlite3_bind_null(raw, index)
            }
        }
        return code
    }

    private func error(_ code: Int32) -> DatabaseError {
        DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)), sql: statement.sql)
    }
}
