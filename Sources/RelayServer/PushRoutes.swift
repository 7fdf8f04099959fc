import Logging
import RelayCluster
import RelayCore
import RelayProtocol
import RelayWebSocket

extension RelayServer {
  /// §9a `PUT /v1/push/devices/{device}` `{token, kind, environment?}` → 204 and
  /// `DELETE /v1/push/devices/{device}` → 204, for an app whose socket is not up yet.
  /// `Authorization: Bearer <user token>` as for the call API (401 without a valid
  /// one, always in dev mode); the action goes through the input log so a cluster
  /// replicates the registration.
  func routePush(_ conn: ServerConnection, _ head: HTTPRequestHead, _ parts: [String], body: [UInt8]) {
    guard parts.count == 4, parts[2] == "devices" else { return respond(conn, status: 404, body: Array("not found".utf8)) }
    guard let token = bearer(head), core.verifyUserToken(token, at: now) != nil else {
      return respond(conn, status: 401, headers: [("WWW-Authenticate", "Bearer")], body: [])
    }
    let device = parts[3]
    guard PushFields.isDevice(device) else {
      return respondCallError(conn, 400, "bad_request", "device must be 1–128 bytes of A-Z a-z 0-9 . _ : -")
    }
    switch head.method {
    case "PUT":
      switch Self.pushRegistration(body) {
      case .success(let fields): admin(conn, .pushDevice(.register(fields), device: device, token: token))
      case .failure(let error): respondCallError(conn, 400, "bad_request", error.message)
      }
    case "DELETE":
      admin(conn, .pushDevice(.unregister, device: device, token: token))
    default:
      respond(conn, status: 405, headers: [("Allow", "PUT, DELETE")], body: [])
    }
  }

  /// The body of `PUT /v1/push/devices/{device}`, checked like `push.register`.
  static func pushRegistration(_ body: [UInt8]) -> Result<PushRegistrationFields, PushFieldError> {
    guard let object = try? JSONParser.parse(body).objectValue else {
      return .failure(PushFieldError("body must be {\"token\", \"kind\", \"environment\"?}"))
    }
    guard let token = object["token"]?.stringValue, let kind = object["kind"]?.stringValue else {
      return .failure(PushFieldError("token and kind must be strings"))
    }
    var environment: String?
    switch object["environment"] {
    case nil, .null?: environment = nil
    case .string(let s)?: environment = s
    default: return .failure(PushFieldError("environment must be a string"))
    }
    return PushFields.registration(token: token, kind: kind, environment: environment, device: nil)
  }

  /// A provider answered that `token` of `uid` is gone (APNs 410, `BadDeviceToken`,
  /// `DeviceTokenNotForTopic`; FCM `UNREGISTERED`): removed through the input log, so
  /// every node of a cluster forgets it. No connection waits for the answer.
  func pushTokenInvalid(uid: String, token: String) {
    admin(nil, .removePushToken(uid: uid, token: token))
  }

  /// Performs one `Effect.push` this node owns. Until a push service is attached the
  /// job is only counted and logged (debug), one structured line per job that tests
  /// read to check the core's decisions end to end.
  func performPush(_ job: PushJob) {
    pushJobsPerformed += 1
    logger.debug("push job: \(job)")
    pushService?.submit(job)
  }

  /// §9a `relay_push_registrations` and the jobs this node performed.
  func refreshPushMetrics() {
    let s = core.pushStats
    metrics.mirror("relay_push_registrations", s.registrations)
    metrics.mirror("relay_push_devices", s.devices)
    metrics.mirrorCounter("relay_push_jobs_total", pushJobsPerformed)
    guard let pushService else { return }
    for (key, total) in pushService.counts {
      let parts = key.split(separator: "|").map(String.init)
      metrics.mirrorCounter("relay_push_sent_total", labels: [("provider", parts[0]), ("result", parts[1])], total)
    }
    metrics.mirror("relay_push_queued", pushService.held)
    metrics.mirrorCounter("relay_push_apns_tokens_signed_total", UInt64(pushService.apnsTokensSigned))
    metrics.mirrorCounter("relay_push_fcm_tokens_fetched_total", UInt64(pushService.fcmTokensFetched))
  }
}
