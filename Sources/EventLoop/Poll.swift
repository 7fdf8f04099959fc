import CLibUV

/// Watches a socket that another library owns and reads or writes itself (libcurl's
/// multi socket interface): `uv_poll_t`, level-triggered readiness only
/// (`docs/src/poll.rst`). The socket must stay open until this handle is closed, and
/// at most one `Poll` may watch one descriptor at a time.
public final class Poll: CallbackHandle {
  /// Which readiness to watch or was seen.
  public struct Events: OptionSet, Sendable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let readable = Events(rawValue: Int32(UV_READABLE.rawValue))
    public static let writable = Events(rawValue: Int32(UV_WRITABLE.rawValue))
  }

  private var handle: UnsafeMutablePointer<uv_poll_t> { handle(as: uv_poll_t.self) }
  private var onEvents: ((_ status: Int32, _ events: Events) -> Void)?

  /// Initialises a stopped watcher of the socket `fd` on `loop`.
  public init(loop: Loop, socket fd: Int32) {
    super.init(uv_poll_t.self, "uv_poll_init_socket") { uv_poll_init_socket(loop.rawLoop, $0, fd) }
  }

  /// (Re)starts watching `events`; `callback` gets a libuv status (negative: an error
  /// on the socket) and the readiness seen.
  public func start(_ events: Events, _ callback: @escaping (_ status: Int32, _ events: Events) -> Void) {
    precondition(!isClosing, "start() on a closed Poll")
    onEvents = callback
    preconditionLibUVSucceeded(uv_poll_start(handle, events.rawValue, pollCallback), "uv_poll_start")
  }

  /// Stops watching; it can be started again.
  public func stop() {
    guard !isClosing else { return }
    uv_poll_stop(handle)
  }

  override func handleDidClose() {
    onEvents = nil
    super.handleDidClose()
  }

  fileprivate func fire(status: Int32, events: Int32) {
    onEvents?(status, Events(rawValue: events))
  }
}

private func pollCallback(_ handle: UnsafeMutablePointer<uv_poll_t>?, _ status: Int32, _ events: Int32) {
  guard let handle, let data = handle.pointee.data else { return }
  unretainedOwner(data, as: Poll.self).fire(status: status, events: events)
}
