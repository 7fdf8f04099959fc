import RelayCluster
import RelayCrypto

// Whether this node may join a generation (docs/cluster.md, "Rolling upgrades"): every
// node of a generation shares its log format, rules version and shared flags.
extension ClusterNode {
  /// `format rules configDigest` of this binary and flags.
  var ruleLine: String {
    let r = host.clusterRules
    return "\(r.format) \(r.rules) \(Crypto.hex(r.configDigest))"
  }

  /// The generation differs from this node only by an older rules version: this node
  /// can take it over (docs/cluster.md, "Rolling upgrades").
  func olderRules(meta: String) -> Bool {
    let theirs = meta.split(separator: " ")
    let mine = ruleLine.split(separator: " ")
    guard theirs.count == 3, theirs[0] == mine[0], theirs[2] == mine[2], let r = UInt32(theirs[1]) else { return false }
    return r < host.clusterRules.rules
  }

  /// Why this node may not join a generation with these shared settings.
  func refusal(meta: String) -> String {
    let theirs = meta.split(separator: " ")
    let mine = ruleLine.split(separator: " ")
    guard theirs.count == 3 else { return "the cluster's metadata in Redis is unreadable: \(meta)" }
    if theirs[0] != mine[0] { return "the cluster's log format \(theirs[0]) differs from this binary's \(mine[0])" }
    if theirs[2] != mine[2] {
      return "this node's shared flags (--grace, --ring-timeout, limits, --secret, …) differ from the cluster's"
    }
    return "the cluster runs rules version \(theirs[1]), this binary has \(mine[1]); see docs/cluster.md, rolling upgrades"
  }
}
