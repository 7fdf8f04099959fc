// The one source of randomness pure code and its tests may use: seeded, so a run
// replays exactly (DESIGN.md: no unseeded randomness in the pure targets).

/// SplitMix64: small, fast and good enough to drive schedules, fuzz inputs and masks.
public struct SeededRandom: RandomNumberGenerator, Sendable {
  public var state: UInt64

  /// `state` is used as given (a stream position).
  public init(state: UInt64) { self.state = state }

  /// Neighbouring seeds must not give shifted copies of one stream: start from the
  /// mixed seed, not the seed itself.
  public init(seed: UInt64) {
    state = seed
    state = next()
  }

  public mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  /// Uniform enough in 0..<n for tests and schedules (modulo bias is negligible here);
  /// 0 when there is nothing to choose from.
  public mutating func below(_ n: Int) -> Int { n <= 0 ? 0 : Int(next() % UInt64(n)) }

  /// Uniform in [0, 1), from the top 53 bits.
  public mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }

  /// True with `percent` % probability.
  public mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

  /// One of `values`, or nil when there are none.
  public mutating func pick<T>(_ values: [T]) -> T? { values.isEmpty ? nil : values[below(values.count)] }
}
