// Raise hand (§7): one queue per session in `hand.raised` order; raise/lower commands
// are rate limited per participant (sliding window, refused commands change nothing).
import RelayProtocol

extension RelayCore {
  func raiseHand(_ id: String, _ request: Request) throws(Refusal) {
    let (session, me) = try memberSession(id, request)
    try acquireHandRate(me, in: session, request)
    ok(request)
    guard session.handIndex(of: me.uid) == nil else { return }  // §7: already up, place kept
    // §7: raisedAt never decreases along the queue, even if the wall clock steps back.
    let raisedAt = max(request.at.wallMs, session.hands.last?.raisedAtWallMs ?? Int64.min)
    let hand = Hand(uid: me.uid, name: me.name, raisedAtWallMs: raisedAt)
    session.queueHand(hand)
    emit(session, "hand.raised", at: request.at) { w in
      w.field("uid", hand.uid)
      w.field("name", hand.name)
      w.field("raisedAt", hand.raisedAtWallMs)
    }
  }

  /// `hand.lower {session, uid?}`: own hand ("self"), or another's as host ("host").
  func lowerHand(_ id: String, uid: String?, _ request: Request) throws(Refusal) {
    let (session, me) = try memberSession(id, request)
    let target = uid ?? me.uid
    guard target == me.uid || me.role == .host else {
      throw Refusal(.forbidden, "host role required")
    }
    try acquireHandRate(me, in: session, request)
    ok(request)
    guard let index = session.handIndex(of: target) else { return }  // not up: no change
    session.hands.remove(at: index)
    emit(session, "hand.lowered", at: request.at) { w in
      w.field("uid", target)
      w.field("by", me.uid)
      w.field("reason", target == me.uid ? "self" : "host")
    }
  }

  /// `hand.lower_all` (host) → `hands.cleared {by}` only if any hand was up.
  func lowerAllHands(_ id: String, _ request: Request) throws(Refusal) {
    let (session, me) = try memberSession(id, request)
    guard me.role == .host else { throw Refusal(.forbidden, "host role required") }
    try acquireHandRate(me, in: session, request)
    ok(request)
    guard !session.hands.isEmpty else { return }
    session.hands.removeAll()
    emit(session, "hands.cleared", at: request.at) { w in w.field("by", me.uid) }
  }

  func acquireHandRate(_ participant: Participant, in session: Session, _ request: Request) throws(Refusal) {
    guard session.acquire(\.hand, of: participant, at: request.at, limit: config.handRate, windowMs: config.handWindowMs)
    else {
      throw Refusal(.rateLimited, "at most \(config.handRate) raise/lower per \(config.handWindowMs) ms")
    }
  }
}
