// §5 with `resume.after_unload` (§4 capabilities): a browser closes every WebSocket
// of a page it unloads with 1001 (RFC 6455 §7.4.1, "a browser having navigated away
// from a page"), a reload included, and script cannot stop it. Such a close is clean
// on the wire, but for a client that keeps its place across reloads it is not a
// leave: the page that loads next resumes. A query for the shell, which decides how
// the socket ended (the `closed` input's `clean`), so replicas see one answer.
import RelayPrimitives

extension RelayCore {
  /// Whether the peer's close with `code` leaves `c`'s participant lost rather than
  /// gone: a 1001 from a connection that offered `resume.after_unload`.
  public func closeLeavesLost(_ c: ConnectionID, peerCode code: UInt16) -> Bool {
    code == CloseCode.goingAway && connections[c]?.goingAwayIsLost == true
  }
}
