extension ServiceSetting {
    /// The configuration that flags (which win) and the environment describe, on top of the defaults.
    ///
    /// - Parameters:
    ///   - arguments: `--flag value` or `--flag=value` pairs, the flags of `ServiceSetting.all`.
    ///   - environment: the process environment; an empty variable counts as unset.
    /// - Throws: `ServiceSettingError` naming the flag or variable, and the value, that cannot be used.
    public static func resolve(arguments: [String], environment: [String: String]) throws(ServiceSettingError) -> ServiceConfiguration {
        let flags = try parseFlags(arguments)
        var configuration = ServiceConfiguration()
        for setting in all {
            let source: (name: String, text: String)
            if let text = flags[setting.flag] {
                source = ("--\(setting.flag)", text)
            } else if let text = environment[setting.variable], !text.isEmpty {
                source = (setting.variable, text)
            } else {
                continue
            }
            do {
                try setting.apply(&configuration, source.text)
            } catch {
                throw ServiceSettingError(description: "\(source.name)=\(source.text) \(error.description)")
            }
        }
        if (configuration.tlsCertificate == nil) != (configuration.tlsKey == nil) {
            throw ServiceSettingError(description: "SYNCHEALTH_TLS_CERTIFICATE and SYNCHEALTH_TLS_KEY go together: set both, or neither")
        }
        return configuration
    }

    static func parseFlags(_ arguments: [String]) throws(ServiceSettingError) -> [String: String] {
        let known = Set(all.map(\.flag))
        var flags: [String: String] = [:]
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("--") else { throw ServiceSettingError(description: "unexpected argument \(argument)") }
            var name = String(argument.dropFirst(2))
            let value: String
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            } else {
                guard index < arguments.endIndex else { throw ServiceSettingError(description: "--\(name) needs a value") }
                value = arguments[index]
                index += 1
            }
            guard known.contains(name) else { throw ServiceSettingError(description: "unknown option --\(name)") }
            flags[name] = value
        }
        return flags
    }

    /// The settings as `synchealth serve --help` lists them: flag, help, variable and default.
    public static var helpText: String {
        all.map { "--\($0.flag), \($0.variable) (default \($0.defaultText)): \($0.help)" }.joined(separator: "\n")
    }
}
