// The persistent device id (`hello.device`, protocol/ §4): generated once per app
// install, kept in a file in the app's own container, read again at every launch,
// so push tokens registered for this device keep meaning this device.

public import Foundation

/// Where `RelayClient` gets the id it sends as `hello.device`.
public enum DeviceIdentity: Sendable, Equatable {
  /// Generated on first use and kept in `file` (nil: `RelayDeviceID.defaultFile`).
  case persistent(file: URL? = nil)
  /// The app's own id (1–128 bytes of `[A-Za-z0-9._:-]`, `DeviceID.isValid`).
  case fixed(String)
  /// No `hello.device`: the relay cannot tell this connection's device is awake,
  /// and `push.register` then needs an explicit device.
  case none
}

/// Reads and creates the stored device id.
public enum RelayDeviceID {
  /// The file name inside the store's folder.
  static let fileName = "device-id"

  /// The default store: Application Support/Relay/device-id on Apple platforms (the
  /// app's own container); on Linux `$XDG_DATA_HOME/relay/device-id`, else
  /// `~/.local/share/relay/device-id` (XDG Base Directory Specification).
  public static var defaultFile: URL? {
    #if canImport(Darwin)
      guard let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first
      else { return nil }
      return support.appendingPathComponent("Relay", isDirectory: true).appendingPathComponent(fileName)
    #else
      let env = ProcessInfo.processInfo.environment
      let base: URL
      if let xdg = env["XDG_DATA_HOME"], xdg.hasPrefix("/") {
        base = URL(fileURLWithPath: xdg, isDirectory: true)
      } else if let home = env["HOME"], !home.isEmpty {
        base = URL(fileURLWithPath: home, isDirectory: true).appendingPathComponent(".local/share", isDirectory: true)
      } else {
        return nil
      }
      return base.appendingPathComponent("relay", isDirectory: true).appendingPathComponent(fileName)
    #endif
  }

  /// The id stored in `file` (default: `defaultFile`), created on first use. Two
  /// processes starting at once agree: the file is created by a hard link, which
  /// fails if it exists, and the loser reads the winner's id.
  /// - Throws: when the folder cannot be created or the file neither read nor written.
  public static func load(from file: URL? = nil) throws -> String {
    guard let file = file ?? defaultFile else { throw CocoaError(.fileNoSuchFile) }
    if let stored = read(file) { return stored }
    var generator = SystemRandomNumberGenerator()
    let fresh = DeviceID.generate(using: &generator)
    let folder = file.deletingLastPathComponent()
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    let scratch = folder.appendingPathComponent(".\(fileName).\(fresh)")
    try Data(fresh.utf8).write(to: scratch)
    defer { try? FileManager.default.removeItem(at: scratch) }
    do {
      try FileManager.default.linkItem(at: scratch, to: file)
    } catch {
      // Another process won the race, or an unreadable file is in the way.
      if let stored = read(file) { return stored }
      try? FileManager.default.removeItem(at: file)
      try FileManager.default.linkItem(at: scratch, to: file)
    }
    excludeFromBackup(file)
    return fresh
  }

  /// The id in `file`, if it holds a valid one.
  static func read(_ file: URL) -> String? {
    guard let data = try? Data(contentsOf: file) else { return nil }
    let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    return DeviceID.isValid(text) ? text : nil
  }

  /// A backup restored onto another phone must not bring this phone's id along:
  /// two devices with one id would replace each other's push tokens (§9a: one
  /// token per user, device and kind).
  static func excludeFromBackup(_ file: URL) {
    #if canImport(Darwin)
      var values = URLResourceValues()
      values.isExcludedFromBackup = true
      var url = file
      try? url.setResourceValues(values)
    #endif
  }

  /// The id `identity` stands for. A store that cannot be used yields an id kept
  /// for this process only (pushes registered with it stop matching after a
  /// relaunch); an invalid fixed id is a programmer error.
  static func resolve(_ identity: DeviceIdentity) -> String? {
    switch identity {
    case .none:
      return nil
    case .fixed(let id):
      precondition(DeviceID.isValid(id), "hello.device must be 1–128 bytes of [A-Za-z0-9._:-]; got \(id)")
      return id
    case .persistent(let file):
      if let id = try? load(from: file) { return id }
      var generator = SystemRandomNumberGenerator()
      return DeviceID.generate(using: &generator)
    }
  }
}
