// Decoding of `hello` (§4, §8) and `call.initiate` (§9), the commands with nested
// objects.

extension Fields {
  func hello() throws(CommandError) -> Hello {
    let token = try optionalString("token")
    var dev: DevLogin?
    if let devObject = try optionalObject("dev") {
      let inner = Fields(object: devObject, limits: limits, re: re, type: type)
      dev = DevLogin(
        uid: try inner.identifier("uid"), name: try inner.string("name"),
        avatar: try inner.optionalString("avatar"), role: try inner.role("role"))
    }
    var resume: ResumeRequest?
    if let resumeObject = try optionalObject("resume") {
      resume = try Fields(object: resumeObject, limits: limits, re: re, type: type).resumeRequest()
    }
    return Hello(token: token, dev: dev, resume: resume, device: try device(), capabilities: try capabilities())
  }

  /// `capabilities`: at most 16 names, each an identifier.
  func capabilities() throws(CommandError) -> [String] {
    guard let value = object["capabilities"] else { return [] }
    guard let list = value.arrayValue, list.count <= 16 else { throw bad("capabilities must be an array of at most 16 names") }
    var names: [String] = []
    for element in list {
      guard let name = element.stringValue, !name.isEmpty, name.utf8.count <= limits.maxIdentifierBytes
      else { throw bad("capabilities must be an array of at most 16 names") }
      names.append(name)
    }
    return names
  }

  /// `{token, sessions: {"<session>": <last seq seen>}}`; seqs are integers ≥ 0.
  func resumeRequest() throws(CommandError) -> ResumeRequest {
    let token = try string("token")
    var sessions: [(session: String, seq: Int64)] = []
    if let map = try optionalObject("sessions") {
      for member in map.members {
        guard let seq = member.value.numberValue?.int64, seq >= 0 else {
          throw bad("resume.sessions values must be integers ≥ 0")
        }
        guard !member.key.isEmpty, member.key.utf8.count <= limits.maxIdentifierBytes else {
          throw bad("resume.sessions keys must be session ids")
        }
        sessions.append((session: member.key, seq: seq))
      }
    }
    return ResumeRequest(token: token, sessions: sessions)
  }

  func callInitiate() throws(CommandError) -> Command {
    guard let list = object["to"]?.arrayValue else { throw bad("to must be an array of uids") }
    guard (1...limits.maxCallees).contains(list.count) else {
      throw bad("to must list 1–\(limits.maxCallees) uids")
    }
    var to: [String] = []
    for element in list {
      guard let uid = element.stringValue, !uid.isEmpty, uid.utf8.count <= limits.maxIdentifierBytes
      else { throw bad("to must be an array of uids") }
      to.append(uid)
    }
    guard let callType = CallType(rawValue: try string("callType")) else {
      throw bad("callType must be audio or video")
    }
    let metadata = try optionalObject("metadata")
    if let metadata, !JSONValue.object(metadata).hasOnlyFiniteNumbers {
      throw bad("metadata holds a number outside the range of a double (RFC 8259 §6)")
    }
    if let metadata, JSONValue.object(metadata).encoded().count > limits.maxMetadataBytes {
      throw bad("metadata exceeds \(limits.maxMetadataBytes) bytes")
    }
    return .callInitiate(to: to, callType: callType, metadata: metadata)
  }
}
