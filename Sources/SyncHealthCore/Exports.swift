// The device monitor is part of the domain: whoever imports the core sees its types, as before it moved into
// the client package (which the server and the apps both build).
@_exported import SyncHealthMonitor
