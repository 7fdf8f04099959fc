// The relay's HTTP API over URLSession, for an app woken by a push before its
// socket is up (protocol/ §9, §9a): register the push token, read the call, accept
// or reject it. URLSession does plain HTTP(S) on every platform the SDK runs on
// (on Linux through FoundationNetworking and libcurl), so the code tested here is
// the code an iPhone runs. Requests and answers are built and read by
// `HTTPAction` / `HTTPAnswer` in RelayClientCore.

public import Foundation
#if canImport(FoundationNetworking)
  public import FoundationNetworking
#endif
public import RelayClientCore

/// The HTTP side of the relay, authenticated with the user's token
/// (`Authorization: Bearer`, the same JWT as `hello.token`).
///
///     // In pushRegistry(_:didReceiveIncomingPushWith:for:completion:), after reporting to CallKit:
///     let api = RelayHTTPAPI(relayURL: relayURL, token: jwt, device: try? RelayDeviceID.load())
///     try await api.acceptCall(callID: call.id)
public struct RelayHTTPAPI: Sendable {
  /// `http(s)://host[:port]` of the relay (from a `ws(s)://` URL: the same address).
  public let baseURL: URL
  /// The user token.
  public var token: String
  /// The device push registration refers to (`RelayClient.deviceID`).
  public var device: String?
  /// Per-request timeout, seconds.
  public var timeout: TimeInterval = 10
  private let session: URLSession

  /// The SDK's own session for the HTTP API: no cookies, cache or credentials kept
  /// (`ephemeral`), and apart from the app's `URLSession.shared`.
  public static let session = URLSession(configuration: .ephemeral)

  /// `relayURL` may be the socket URL (`wss://relay.example.com/v1/ws`) or the
  /// HTTP origin; only scheme, host and port are used.
  public init(relayURL: URL, token: String, device: String? = nil, session: URLSession = RelayHTTPAPI.session) {
    var parts = URLComponents()
    switch relayURL.scheme?.lowercased() {
    case "wss", "https": parts.scheme = "https"
    default: parts.scheme = "http"
    }
    parts.host = relayURL.host
    parts.port = relayURL.port
    baseURL = parts.url ?? relayURL
    self.token = token
    self.device = device
    self.session = session
  }

  // MARK: Push devices (§9a)

  /// `PUT /v1/push/devices/{device}`: stores this device's token, replacing the
  /// one of the same kind. PushKit's `Data` is sent as hex.
  public func registerPushToken(_ token: Data, kind: PushKind, environment: PushEnvironment = .production)
    async throws(RelayError)
  {
    try await registerPushToken(DeviceID.apnsToken(Array(token)), kind: kind, environment: environment)
  }

  /// `PUT /v1/push/devices/{device}` with a token given as text.
  /// - Throws: `.server(code: .badRequest, …)` without a device id or for a bad token.
  public func registerPushToken(_ token: String, kind: PushKind, environment: PushEnvironment = .production)
    async throws(RelayError)
  {
    let device = try requireDevice()
    _ = try await perform(.registerPushToken(token, kind: kind, environment: environment, device: device))
  }

  /// `DELETE /v1/push/devices/{device}`: this device gets no more pushes (sign-out).
  public func unregisterPushTokens() async throws(RelayError) {
    _ = try await perform(.unregisterPushTokens(device: try requireDevice()))
  }

  // MARK: Calls (§9)

  /// `GET /v1/calls/{callId}`: where the call stands (e.g. it was answered elsewhere
  /// while the app slept). `callees` holds each callee's state.
  public func call(_ callID: String) async throws(RelayError) -> Call {
    try decodeCall(try await perform(.call(callID)))
  }

  /// `POST /v1/calls/{callId}/accept`: the answer from CallKit's `CXAnswerCallAction`
  /// before the socket is up. Idempotent: a repeated accept returns the same call.
  @discardableResult
  public func acceptCall(callID: String) async throws(RelayError) -> Call {
    try decodeCall(try await perform(.callAction("accept", callID)))
  }

  /// `POST /v1/calls/{callId}/reject`; `reason` is `declined` (default) or `busy`.
  @discardableResult
  public func rejectCall(callID: String, reason: String? = nil) async throws(RelayError) -> Call {
    try decodeCall(try await perform(.callAction("reject", callID, reason: reason)))
  }

  /// `POST /v1/calls/{callId}/cancel` (the caller, while a callee still rings).
  @discardableResult
  public func cancelCall(callID: String) async throws(RelayError) -> Call {
    try decodeCall(try await perform(.callAction("cancel", callID)))
  }

  // MARK: Plumbing

  private func requireDevice() throws(RelayError) -> String {
    guard let device, DeviceID.isValid(device) else {
      throw .server(code: .badRequest, message: "no device id (RelayClientOptions.device / RelayDeviceID.load())")
    }
    return device
  }

  private func decodeCall(_ body: [UInt8]) throws(RelayError) -> Call {
    guard let call = HTTPAnswer.call(body, selfUID: HTTPAnswer.subject(ofToken: token)) else {
      throw .server(code: .internal, message: "the relay's answer is not a call object")
    }
    return call
  }

  /// Sends `action`; the body of a 2xx answer, else the error it stands for. A
  /// request that never reached the relay is `.notConnected`; one whose answer was
  /// lost, `.connectionLost` (it may have taken effect: the call actions are
  /// idempotent, so repeat it).
  private func perform(_ action: HTTPAction) async throws(RelayError) -> [UInt8] {
    guard let url = URL(string: baseURL.absoluteString + action.path) else { throw .notConnected }
    var request = URLRequest(url: url, timeoutInterval: timeout)
    request.httpMethod = action.method
    request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
    if !action.body.isEmpty {
      request.httpBody = Data(action.body)
      request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    }
    let outcome: Result<(Int, [UInt8]), RelayError> = await withCheckedContinuation { continuation in
      session.dataTask(with: request) { data, response, error in
        if let status = (response as? HTTPURLResponse)?.statusCode {
          continuation.resume(returning: .success((status, Array(data ?? Data()))))
        } else {
          continuation.resume(returning: .failure(Self.transportError(error)))
        }
      }.resume()
    }
    let (status, body) = try outcome.get()
    guard (200..<300).contains(status) else { throw HTTPAnswer.error(status: status, body: body) }
    return body
  }

  /// URLSession's failure as the SDK's: nothing sent, or the outcome unknown.
  private static func transportError(_ error: (any Error)?) -> RelayError {
    let unsent: Set<URLError.Code> = [
      .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed, .notConnectedToInternet, .badURL,
      .unsupportedURL, .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
    ]
    if let code = (error as? URLError)?.code, unsent.contains(code) { return .notConnected }
    return .connectionLost
  }
}
