// The fields of push registration (PROTOCOL.md §4 `hello.device`, §9a `push.register`,
// `push.unregister`, `PUT /v1/push/devices/{device}`): one set of rules for the
// WebSocket commands and the HTTP routes alike.

/// `push.register` as decoded: every field already checked. `kind` and `environment`
/// are the wire names (`apns-voip`/`apns`/`fcm`, `production`/`sandbox`); `token` is
/// canonical (APNs hex lowercased).
public struct PushRegistrationFields: Sendable, Equatable {
  public var token: String
  public var kind: String
  public var environment: String?
  public var device: String?

  public init(token: String, kind: String, environment: String?, device: String?) {
    self.token = token
    self.kind = kind
    self.environment = environment
    self.device = device
  }
}

public enum PushFields {
  public static let kinds = ["apns-voip", "apns", "fcm"]
  public static let environments = ["production", "sandbox"]
  /// §4 `hello.device`: 1–128 bytes.
  public static let maxDeviceBytes = 128
  /// §9a: APNs tokens are 64–200 hex digits; FCM tokens 1–4 096 printable ASCII bytes.
  public static let apnsTokenDigits = 64...200
  public static let maxFCMTokenBytes = 4_096

  /// §4: 1–128 bytes of `[A-Za-z0-9._:-]`.
  public static func isDevice(_ s: String) -> Bool {
    let bytes = s.utf8
    guard (1...maxDeviceBytes).contains(bytes.count) else { return false }
    return bytes.allSatisfy { b in
      (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
        || b == 0x2E || b == 0x5F || b == 0x3A || b == 0x2D
    }
  }

  /// The token in canonical form (APNs hex lowercased: APNs treats it as bytes), or
  /// the reason it is refused (`bad_request`).
  public static func canonicalToken(_ token: String, kind: String) -> Result<String, PushFieldError> {
    let bytes = token.utf8
    if kind == "fcm" {
      guard (1...maxFCMTokenBytes).contains(bytes.count), bytes.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E }) else {
        return .failure(PushFieldError("an fcm token must be 1–\(maxFCMTokenBytes) printable ASCII bytes"))
      }
      return .success(token)
    }
    guard apnsTokenDigits.contains(bytes.count), bytes.allSatisfy(isHexDigit) else {
      return .failure(PushFieldError("an \(kind) token must be 64–200 hex digits"))
    }
    return .success(token.lowercased())
  }

  /// Checks kind, environment and token together; device may be absent (the
  /// connection's `hello.device` then applies).
  public static func registration(
    token: String, kind: String, environment: String?, device: String?
  ) -> Result<PushRegistrationFields, PushFieldError> {
    guard kinds.contains(kind) else { return .failure(PushFieldError("kind must be apns-voip, apns or fcm")) }
    if let environment {
      guard environments.contains(environment) else {
        return .failure(PushFieldError("environment must be production or sandbox"))
      }
      guard kind != "fcm" || environment == "production" else {
        return .failure(PushFieldError("environment sandbox is for APNs tokens only"))
      }
    }
    if let device, !isDevice(device) {
      return .failure(PushFieldError("device must be 1–\(maxDeviceBytes) bytes of A-Z a-z 0-9 . _ : -"))
    }
    switch canonicalToken(token, kind: kind) {
    case .failure(let error): return .failure(error)
    case .success(let canonical):
      return .success(PushRegistrationFields(token: canonical, kind: kind, environment: environment, device: device))
    }
  }

  /// `push.unregister.token`: any token a registration could hold. The canonical form
  /// matches what `push.register` stored (APNs hex lowercased).
  public static func unregisterToken(_ token: String) -> String? {
    let bytes = token.utf8
    guard (1...maxFCMTokenBytes).contains(bytes.count), bytes.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E }) else {
      return nil
    }
    if apnsTokenDigits.contains(bytes.count), bytes.allSatisfy(isHexDigit) { return token.lowercased() }
    return token
  }

  static func isHexDigit(_ b: UInt8) -> Bool {
    (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66)
  }
}

/// Why a push field is refused (`bad_request` on the wire, 400 over HTTP).
public struct PushFieldError: Error, Sendable, Equatable {
  public let message: String
  public init(_ message: String) { self.message = message }
}

extension Fields {
  func pushRegister() throws(CommandError) -> Command {
    let result = PushFields.registration(
      token: try string("token"), kind: try string("kind"), environment: try optionalString("environment"),
      device: try optionalString("device"))
    switch result {
    case .success(let fields): return .pushRegister(fields)
    case .failure(let error): throw bad(error.message)
    }
  }

  func pushUnregister() throws(CommandError) -> Command {
    guard let token = PushFields.unregisterToken(try string("token")) else {
      throw bad("token must be 1–\(PushFields.maxFCMTokenBytes) printable ASCII bytes")
    }
    return .pushUnregister(token: token)
  }

  /// §4 `hello.device`, when present.
  func device() throws(CommandError) -> String? {
    guard let device = try optionalString("device") else { return nil }
    guard PushFields.isDevice(device) else {
      throw bad("device must be 1–\(PushFields.maxDeviceBytes) bytes of A-Z a-z 0-9 . _ : -")
    }
    return device
  }
}
