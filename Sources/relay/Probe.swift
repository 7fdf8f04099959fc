import ArgumentParser
import RelayServer

/// `relay probe [URL]`: exits 0 when `GET URL` answers 200, 1 otherwise. The image's
/// health check (docker/Dockerfile) and the Kubernetes readiness probe run it against
/// `/readyz` (protocol/ §12): the image carries no curl, and an exec probe needs no shell.
struct Probe: ParsableCommand {
  static let configuration = CommandConfiguration(
    abstract: "GET a URL (default: /readyz of RELAY_LISTEN); exit 0 on status 200.")

  @Argument(help: "http:// or https:// URL (trust: the system's roots).") var url: String?
  @Option(help: "Connect and response timeout in ms.") var timeout: UInt64 = 2_000

  func run() throws {
    let target = try url ?? Self.readyURL(listen: Env.string("listen") ?? "127.0.0.1:8080")
    switch HTTPProbe.get(target, timeoutMs: timeout) {
    case .success(200):
      return
    case .success(let code):
      print("\(target): status \(code)")
    case .failure(let failure):
      print("\(target): \(failure)")
    }
    throw ExitCode.failure
  }

  /// `/readyz` of the address `relay serve` listens on when given the same
  /// environment: a wildcard address is asked on its loopback.
  static func readyURL(listen: String) throws -> String {
    var (host, port) = try Serve.parseListen(listen)
    if host == "0.0.0.0" { host = "127.0.0.1" }
    if host == "::" { host = "::1" }
    return "http://\(host.contains(":") ? "[\(host)]" : host):\(port)/readyz"
  }
}
