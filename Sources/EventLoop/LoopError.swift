import CLibUV

/// A libuv error: the negative `UV_E*` code a libuv function returned or passed to a
/// callback. libuv has no global error state (`docs/src/errors.rst`), so the code is
/// all there is; `description` adds `uv_err_name` and `uv_strerror`.
public struct LoopError: Error, CustomStringConvertible, Equatable, Sendable {
  /// The negative libuv error code, e.g. `UV_ECONNRESET`.
  public let code: Int32

  /// Wraps a libuv error code. `code` must be negative.
  public init(code: Int32) {
    self.code = code
  }

  /// The symbolic name, e.g. `"ECONNRESET"`.
  public var name: String {
    String(cString: uv_err_name(code))
  }

  /// `"ECONNRESET: connection reset by peer"`.
  public var description: String {
    "\(name): \(String(cString: uv_strerror(code)))"
  }

  /// The peer closed its side (`UV_EOF`).
  public static let endOfFile = LoopError(code: UV_EOF.rawValue)
  /// The peer reset the connection (`UV_ECONNRESET`).
  public static let connectionReset = LoopError(code: UV_ECONNRESET.rawValue)
  /// The peer refused the connection (`UV_ECONNREFUSED`).
  public static let connectionRefused = LoopError(code: UV_ECONNREFUSED.rawValue)
  /// The request was cancelled because its handle was closed (`UV_ECANCELED`).
  public static let cancelled = LoopError(code: UV_ECANCELED.rawValue)
  /// An argument was invalid, e.g. a host that is not an IP literal (`UV_EINVAL`).
  public static let invalidArgument = LoopError(code: UV_EINVAL.rawValue)
}

/// Traps when libuv rejects a call that cannot fail on a well-formed handle of ours
/// (`UV_EBADF`, `UV_EINVAL`, …): that is a bug in this module, not a network
/// condition (DESIGN.md, "Limits and failures").
@inline(__always)
func preconditionLibUVSucceeded(_ result: Int32, _ call: StaticString) {
  precondition(result == 0, "\(call) failed: \(LoopError(code: result))")
}
