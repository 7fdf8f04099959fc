// The command decoder (PROTOCOL.md §2) on arbitrary bytes: a command or a CommandError,
// never a trap, whatever the nesting, numbers or strings.
import FuzzDriver
import RelayProtocol

func fuzzCommand(_ input: UnsafeBufferPointer<UInt8>) {
  let buffer = UnsafeRawBufferPointer(input)
  switch CommandDecoder.decode(buffer) {
  case .success(let envelope): _ = envelope.command.typeName
  case .failure(let error): _ = error.code
  }
}

runFuzzer { data, size in
  fuzzCommand(buffer(data, size))
  return 0
}
