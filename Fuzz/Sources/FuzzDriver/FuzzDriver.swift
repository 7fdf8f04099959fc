// Hands control to libFuzzer. SwiftPM gives every executable its own entry point (and
// aliases `main` to it), so libFuzzer's `main` is never linked; each target's
// main.swift calls this with its one-input function instead.

/// One fuzz input; returns 0 (libFuzzer's contract for "keep going").
public typealias FuzzInput = @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt

@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
  _ argc: UnsafeMutablePointer<CInt>,
  _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
  _ callback: FuzzInput
) -> CInt

/// Runs libFuzzer with the process arguments (`-max_total_time`, corpus dirs, …).
public func runFuzzer(_ callback: FuzzInput) -> Never {
  var argc = CommandLine.argc
  var argv = CommandLine.unsafeArgv
  let status = LLVMFuzzerRunDriver(&argc, &argv, callback)
  exit(status)
}

@_silgen_name("exit") func exit(_ status: CInt) -> Never

/// The input as a buffer (libFuzzer passes a null pointer for the empty input).
public func buffer(_ data: UnsafePointer<UInt8>?, _ size: Int) -> UnsafeBufferPointer<UInt8> {
  UnsafeBufferPointer(start: data, count: data == nil ? 0 : size)
}
