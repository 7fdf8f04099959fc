import RelayCluster
import RelayClusterDriver

/// Clustered inputs (docs/cluster.md): each is appended to the shared log and takes
/// effect when this node's replica reads it back, like every node's
/// (ReplicatedInputs.swift says what each input is as a record).
extension ClusterNode: ReplicatedInputs {
  package var acceptsInputs: Bool { isReady }
  package var isBackedUp: Bool { driver.pipeline.isFull }
}
