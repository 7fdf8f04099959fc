// Where `RelayClient` keeps its place across a relaunch (`RelayClientOptions.persistence`):
// one small file in the app's own container, replaced atomically (written beside it,
// then renamed over it), so a process killed mid-write leaves the old record or the
// new one, never half of one. The same code runs on Apple platforms and Linux.

public import Foundation
import RelayClientCore

/// Whether and where `RelayClient` keeps its place (resume token, sessions, last
/// `seq`s) so a relaunched app resumes within grace instead of joining afresh (§9).
public enum ResumePersistence: Sendable, Equatable {
  /// Nothing is kept: a relaunch starts a fresh connection (the default).
  case none
  /// Kept in `file` (nil: `ResumeFile.defaultFile`, beside the device id).
  case file(URL? = nil)
}

/// The file of a kept place. Used on the transport's thread only.
final class ResumeFile {
  /// The default file's name inside the store's folder.
  static let fileName = "resume-state.json"
  /// Longest wait before a `seq`-only change is written; token and membership
  /// changes are written at once (a stale `seq` still resumes exactly, from itself).
  static let seqDelayMs: Int64 = 250

  let file: URL
  /// The relay URL records are kept for; a record of another relay is not resumed.
  let relay: String

  /// Application Support/Relay on Apple platforms, `$XDG_DATA_HOME/relay` (or
  /// `~/.local/share/relay`) on Linux: the device id's folder.
  static var defaultFile: URL? {
    RelayDeviceID.defaultFile?.deletingLastPathComponent().appendingPathComponent(fileName)
  }

  init?(_ persistence: ResumePersistence, relay: URL) {
    guard case .file(let chosen) = persistence, let file = chosen ?? Self.defaultFile else { return nil }
    self.file = file
    self.relay = relay.absoluteString
  }

  /// The kept place, if the file holds one for this relay.
  func load() -> ResumeRecord? {
    guard let data = try? Data(contentsOf: file), let record = ResumeRecord(decoding: Array(data)),
      record.relay == relay
    else { return nil }
    return record
  }

  /// Replaces the file with `record`, or removes it for nil. A failure (disk full,
  /// no folder) leaves the app running: the next relaunch then joins afresh.
  func store(_ record: ResumeRecord?) {
    guard let record else {
      try? FileManager.default.removeItem(at: file)
      return
    }
    try? FileManager.default.createDirectory(
      at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
    // .atomic: a temporary file beside it, then rename(2) over it.
    guard (try? Data(record.encoded()).write(to: file, options: .atomic)) != nil else { return }
    RelayDeviceID.excludeFromBackup(file)  // a token is for this device only, like its id
  }
}
