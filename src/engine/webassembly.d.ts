// The few WebAssembly APIs the engine's kernels use (model/kernels). Node has them as globals, but TypeScript
// declares them only in the DOM and WebWorker libs, which the engine's project leaves out so that browser APIs
// cannot creep into engine code.
declare namespace WebAssembly {
  interface Memory {
    readonly buffer: ArrayBuffer | SharedArrayBuffer;
    grow(delta: number): number;
  }
  const Memory: { new (descriptor: { initial: number; maximum?: number; shared?: boolean }): Memory };
  interface Module {
    readonly __brand?: 'WebAssembly.Module';
  }
  const Module: { new (bytes: BufferSource): Module };
  interface Instance {
    readonly exports: Record<string, unknown>;
  }
  const Instance: { new (module: Module, imports?: Record<string, Record<string, unknown>>): Instance };
  function validate(bytes: BufferSource): boolean;
}
type BufferSource = ArrayBufferView | ArrayBuffer;
