import ArgumentParser
import RelayPush
import RelayServer

#if canImport(Glibc)
  import Glibc
#endif

/// §9a push provider flags of `relay serve` (each also `RELAY_*`). A setting that
/// cannot work stops the relay at start with exit 64 (ArgumentParser's usage error).
struct PushOptions: ParsableArguments {
  @Option(name: .customLong("apns-key-file"), help: "APNs auth key (.p8, EC P-256 PEM): enables APNs pushes.")
  var apnsKeyFile: String?
  @Option(name: .customLong("apns-key-id"), help: "Key ID of --apns-key-file (the JWT's kid).") var apnsKeyId: String?
  @Option(name: .customLong("apns-team-id"), help: "Apple developer team ID (the JWT's iss).") var apnsTeamId: String?
  @Option(name: .customLong("apns-topic"), help: "The app's bundle ID; VoIP pushes go to <topic>.voip.") var apnsTopic: String?
  @Option(name: .customLong("apns-url"), help: "APNs production endpoint (default https://api.push.apple.com).")
  var apnsURL: String?
  @Option(name: .customLong("apns-sandbox-url"), help: "APNs sandbox endpoint (default https://api.sandbox.push.apple.com).")
  var apnsSandboxURL: String?
  @Option(name: .customLong("apns-token-max-age-ms"), help: .hidden) var apnsTokenMaxAgeMs: Int?
  @Option(name: .customLong("fcm-credentials"), help: "Google service-account JSON: enables FCM pushes.")
  var fcmCredentials: String?
  @Option(name: .customLong("fcm-url"), help: "FCM endpoint (default https://fcm.googleapis.com).") var fcmURL: String?

  /// The providers configured, nil for none; `ValidationError` (exit 64) for a
  /// setting that cannot work.
  func settings() throws -> PushSettings? {
    do {
      let keyFile = apnsKeyFile ?? Env.string("apns-key-file")
      let apns = try PushSettings.apns(
        keyPEM: try keyFile.map { String(decoding: try Self.read($0, flag: "--apns-key-file"), as: UTF8.self) },
        keyId: apnsKeyId ?? Env.string("apns-key-id"), teamId: apnsTeamId ?? Env.string("apns-team-id"),
        topic: apnsTopic ?? Env.string("apns-topic"),
        url: apnsURL ?? Env.string("apns-url") ?? "https://api.push.apple.com",
        sandboxURL: apnsSandboxURL ?? Env.string("apns-sandbox-url") ?? "https://api.sandbox.push.apple.com",
        tokenMaxAgeMs: try (apnsTokenMaxAgeMs ?? Env.int("apns-token-max-age-ms")).map(Int64.init))
      var fcm: PushSettings.FCM?
      if let file = fcmCredentials ?? Env.string("fcm-credentials") {
        fcm = try PushSettings.fcm(
          credentialsJSON: try Self.read(file, flag: "--fcm-credentials"),
          url: fcmURL ?? Env.string("fcm-url") ?? "https://fcm.googleapis.com")
      }
      guard apns != nil || fcm != nil else { return nil }
      return PushSettings(apns: apns, fcm: fcm)
    } catch let error as PushSettingError {
      throw ValidationError(error.description)
    }
  }

  /// A small settings file, whole (keys and credentials are a few KiB).
  static func read(_ path: String, flag: String) throws(PushSettingError) -> [UInt8] {
    guard let file = fopen(path, "rb") else { throw PushSettingError("\(flag) \(path): cannot read (\(String(cString: strerror(errno))))") }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
      let n = fread(&chunk, 1, chunk.count, file)
      bytes.append(contentsOf: chunk.prefix(n))
      if n < chunk.count { break }
      guard bytes.count <= 1 << 20 else { throw PushSettingError("\(flag) \(path): larger than 1 MiB") }
    }
    guard ferror(file) == 0 else { throw PushSettingError("\(flag) \(path): read error") }
    return bytes
  }
}
