// The monitor's types (`Phase`, `AccountStatus`, `SyncErrorReport`, `SyncStateSummary`, ...) are part of the
// reporter's API: `import SyncHealthClient` is enough.
@_exported public import SyncHealthMonitor
