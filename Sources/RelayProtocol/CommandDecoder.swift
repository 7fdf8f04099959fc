// Text message → Envelope (PROTOCOL.md §2). Not JSON, not an object, missing or
// mistyped field → bad_request; unknown type → unknown_type; unknown fields ignored.

/// Decodes one inbound text message.
public enum CommandDecoder {
  public static func decode(_ bytes: [UInt8], limits: DecoderLimits = DecoderLimits())
    -> Result<Envelope, CommandError>
  {
    bytes.withUnsafeBytes { decode($0, limits: limits) }
  }

  /// Decodes one inbound text message from memory the caller owns.
  public static func decode(_ buffer: UnsafeRawBufferPointer, limits: DecoderLimits = DecoderLimits())
    -> Result<Envelope, CommandError>
  {
    let value: JSONValue
    do {
      value = try JSONParser.parse(buffer)
    } catch {
      return .failure(CommandError(code: .badRequest, message: "not JSON (\(error))"))
    }
    guard let object = value.objectValue else {
      return .failure(CommandError(code: .badRequest, message: "not a JSON object"))
    }
    return decode(object: object, limits: limits)
  }

  static func decode(object: JSONObject, limits: DecoderLimits) -> Result<Envelope, CommandError> {
    var re: String?
    switch object["id"] {
    case nil, .null?: re = nil
    case .string(let id)?: re = id
    default: return .failure(CommandError(code: .badRequest, message: "id must be a string"))
    }
    guard let type = object["type"]?.stringValue else {
      return .failure(CommandError(code: .badRequest, message: "type must be a string", re: re))
    }
    let fields = Fields(object: object, limits: limits, re: re, type: type)
    do {
      return .success(Envelope(id: re, command: try fields.command()))
    } catch {
      return .failure(error)
    }
  }
}

/// Typed access to a command's fields; every failure is a `bad_request` carrying `re`.
struct Fields {
  let object: JSONObject
  let limits: DecoderLimits
  let re: String?
  let type: String

  func bad(_ message: String) -> CommandError {
    CommandError(code: .badRequest, message: "\(type): \(message)", re: re, type: type)
  }

  func command() throws(CommandError) -> Command {
    switch type {
    case "hello": return .hello(try hello())
    case "ping": return .ping
    case "session.join": return .sessionJoin(session: try identifier("session"))
    case "session.leave": return .sessionLeave(session: try identifier("session"))
    case "participant.remove":
      return .participantRemove(session: try identifier("session"), uid: try identifier("uid"))
    case "hand.raise": return .handRaise(session: try identifier("session"))
    case "hand.lower":
      return .handLower(session: try identifier("session"), uid: try optionalIdentifier("uid"))
    case "hand.lower_all": return .handLowerAll(session: try identifier("session"))
    case "message.send": return .messageSend(session: try identifier("session"), data: try data())
    case "client.background": return .clientBackground(background: try bool("background"))
    default: return try callCommand()
    }
  }

  func callCommand() throws(CommandError) -> Command {
    switch type {
    case "call.initiate": return try callInitiate()
    case "call.accept": return .callAccept(callId: try identifier("callId"))
    case "call.reject":
      var reason = RejectReason.declined
      if let text = try optionalString("reason") {
        guard let parsed = RejectReason(rawValue: text) else { throw bad("reason must be declined or busy") }
        reason = parsed
      }
      return .callReject(callId: try identifier("callId"), reason: reason)
    case "call.cancel": return .callCancel(callId: try identifier("callId"))
    case "call.end": return .callEnd(callId: try identifier("callId"))
    case "push.register": return try pushRegister()
    case "push.unregister": return try pushUnregister()
    default:
      throw CommandError(code: .unknownType, message: "unknown type \(type)", re: re, type: nil)
    }
  }

  // MARK: Field readers. Optional fields treat an explicit null as absent.

  func optionalString(_ key: String) throws(CommandError) -> String? {
    switch object[key] {
    case nil, .null?: return nil
    case .string(let s)?: return s
    default: throw bad("\(key) must be a string")
    }
  }

  func string(_ key: String) throws(CommandError) -> String {
    guard let value = try optionalString(key) else { throw bad("missing field \(key)") }
    return value
  }

  /// A non-empty id-like string within `maxIdentifierBytes`.
  func optionalIdentifier(_ key: String) throws(CommandError) -> String? {
    guard let value = try optionalString(key) else { return nil }
    guard !value.isEmpty, value.utf8.count <= limits.maxIdentifierBytes else {
      throw bad("\(key) must be 1–\(limits.maxIdentifierBytes) bytes")
    }
    return value
  }

  func identifier(_ key: String) throws(CommandError) -> String {
    guard let value = try optionalIdentifier(key) else { throw bad("missing field \(key)") }
    return value
  }

  func bool(_ key: String) throws(CommandError) -> Bool {
    guard let value = object[key]?.boolValue else { throw bad("\(key) must be a boolean") }
    return value
  }

  func optionalObject(_ key: String) throws(CommandError) -> JSONObject? {
    switch object[key] {
    case nil, .null?: return nil
    case .object(let o)?: return o
    default: throw bad("\(key) must be an object")
    }
  }

  /// §7a: any JSON value (null included) whose compact encoding is ≤ maxDataBytes.
  func data() throws(CommandError) -> [UInt8] {
    guard let value = object["data"] else { throw bad("missing field data") }
    guard value.hasOnlyFiniteNumbers else {
      throw bad("data holds a number outside the range of a double (RFC 8259 §6)")
    }
    let encoded = value.encoded()
    guard encoded.count <= limits.maxDataBytes else {
      throw bad("data exceeds \(limits.maxDataBytes) bytes")
    }
    return encoded
  }

  func role(_ key: String) throws(CommandError) -> Role {
    guard let text = try optionalString(key) else { return .participant }
    guard let role = Role(rawValue: text) else { throw bad("\(key) must be host or participant") }
    return role
  }
}
