// Type-checked on Linux against declaration stubs (`Client/AppleStubs`, `Client/scripts/check-apple-glue`).
#if canImport(SwiftUI)
public import SwiftUI

extension SyncSymbolColor {
    /// The SwiftUI colour CloudKitSyncMonitor gives the symbol.
    public var color: Color {
        switch self {
        case .gray: .gray
        case .red: .red
        case .green: .green
        }
    }
}

extension SyncHealthStatus {
    /// The symbol's SwiftUI colour.
    public var color: Color { symbolColor.color }
}

/// The sync status as CloudKitSyncMonitor's example views show it: the symbol in its colour, then the text.
///
/// ```swift
/// SyncHealthStatusView()     // the status of SyncHealth.shared
/// ```
public struct SyncHealthStatusView: View {
    private let status: SyncHealthStatus

    /// A view of `status`.
    public init(status: SyncHealthStatus) {
        self.status = status
    }

    /// A view of the status of `SyncHealth.shared`.
    public init() {
        self.init(status: .shared)
    }

    public var body: some View {
        HStack {
            Image(systemName: status.symbolName)
                .foregroundStyle(status.color)
            Text(status.description)
        }
    }
}
#endif
